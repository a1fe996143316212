/*
 * config_topic.c — an input topic's settings ("topics.NAME": names,
 * envelope, dedup, ordering, state machine) and the rules between topics
 * (semantics §2, §3, §3b, §4).
 */
#include "config_int.h"

#include "store.h" /* SG_STATE_MAX */

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Topics                                                                   */
/* ------------------------------------------------------------------------ */

static const char *const TOPIC_KEYS[] = {
        "output_topic",    "dlq_topic", "output_partitioning", "envelope",
        "dedup",           "ordering",  "state_machine",       "snapshot",
        "changelog_topic", NULL};
static const char *const ENVELOPE_KEYS[] = {
        "format", "id",     "scope",           "aggregate", "version",
        "type",   "digest", "max_field_bytes", NULL};
static const char *const DEDUP_KEYS[] = {"ttl_ms", NULL};
static const char *const ORDERING_KEYS[] = {"mode",
                                            "first_version",
                                            "max_version_jump",
                                            "new_aggregate",
                                            "stale",
                                            "gap_timeout_ms",
                                            "gap_policy",
                                            "max_parked_per_aggregate",
                                            "max_parked_total",
                                            "max_parked_bytes",
                                            "on_park_overflow",
                                            "epoch",
                                            "epoch_versions",
                                            NULL};
static const char *const SM_KEYS[] = {"initial", "states", "transitions", NULL};
/* The topic's blocks, for a key meant inside one (sg_cfg_check_keys_in). */
static const cfg_block_t TOPIC_BLOCKS[] = {
        {"dedup", DEDUP_KEYS},       {"ordering", ORDERING_KEYS},
        {"envelope", ENVELOPE_KEYS}, {"snapshot", sg_cfg_snapshot_keys},
        {"state_machine", SM_KEYS},  {NULL, NULL}};
/* Every block of a topic and its keys, by path (sg_cfg_key_home). */
const cfg_block_t sg_cfg_topic_places[] = {
        {"topics.*", TOPIC_KEYS},
        {"topics.*.envelope", ENVELOPE_KEYS},
        {"topics.*.dedup", DEDUP_KEYS},
        {"topics.*.ordering", ORDERING_KEYS},
        {"topics.*.state_machine", SM_KEYS},
        {"topics.*.snapshot", sg_cfg_snapshot_keys},
        {NULL, NULL}};
static const char *const TRANSITION_KEYS[] = {"type", "from", "to", NULL};

/** Sets the defaults listed in config.h. */
static sg_err_t topic_defaults(cfg_ctx_t *c, sg_topic_config_t *tc) {
        static const cfg_sect_t sects[] = {
                SECT_TOPIC,     SECT_ENVELOPE,   SECT_ENVELOPE_MAX,
                SECT_DEDUP,     SECT_ORDERING,   SECT_SNAP_KAFKA,
                SECT_SNAP_HTTP, SECT_SNAP_RETRY, SECT_SNAP_OUTPUT};
        sg_err_t err;

        for (size_t i = 0; i < sizeof(sects) / sizeof(sects[0]); i++)
                if ((err = sg_cfg_defaults(c, sects[i], tc)))
                        return err;
        tc->snapshot.source = SG_SNAP_NONE;
        if (!(tc->scope = calloc(1, sizeof(*tc->scope))))
                return sg_cfg_nomem(c);
        tc->scope_cnt = 1;
        return sg_cfg_src_default(c, &tc->scope[0], SG_SRC_CE, "source");
}

/** Format "json" has no CloudEvents attributes to read (semantics §2). */
static sg_err_t no_ce(cfg_ctx_t *c, const char *path, const sg_field_src_t *s) {
        if (s->kind == SG_SRC_CE)
                return sg_cfg_fail(
                        c, path,
                        "\"ce:%s\" needs format \"cloudevents\"; format "
                        "\"json\" allows \"key\", \"header:NAME\", "
                        "\"/json/pointer\"",
                        s->name);
        return SG_OK;
}

/** envelope.format "json": no CloudEvents defaults; id must be mapped, and
 *  version and type are unset unless mapped (dedup-only topic). */
sg_err_t sg_cfg_check_format(cfg_ctx_t *c, const cJSON *env, const char *path,
                             const char *key_path, void *base) {
        sg_topic_config_t *tc = base;
        char p[SG_PATH_SIZE];

        (void)key_path;
        if (tc->format != SG_FORMAT_JSON)
                return SG_OK;
        sg_cfg_src_clear(&tc->version);
        sg_cfg_src_clear(&tc->type);
        for (size_t i = 0; i < tc->scope_cnt; i++)
                sg_cfg_src_clear(&tc->scope[i]);
        tc->scope_cnt = 0;
        if (!cJSON_GetObjectItemCaseSensitive(env, "id")) {
                sg_cfg_path_key(p, path, "id");
                sg_cfg_fail(c, p,
                            "required with format \"json\"; allowed: "
                            "\"key\", \"header:NAME\", \"/json/pointer\"");
        }
        return SG_OK;
}

static sg_err_t parse_envelope(cfg_ctx_t *c, const cJSON *env, const char *path,
                               sg_topic_config_t *tc) {
        char p[SG_PATH_SIZE];
        const cJSON *it;
        size_t since = c->err_cnt;
        sg_err_t err;

        if ((err = sg_cfg_expect_object(c, env, path)))
                return err;
        KEEP(sg_cfg_check_keys(c, env, path, ENVELOPE_KEYS));

        KEEP(sg_cfg_read(c, env, path, SECT_ENVELOPE, tc));

        sg_cfg_path_key(p, path, "scope");
        if ((it = cJSON_GetObjectItemCaseSensitive(env, "scope")) &&
            !cJSON_IsArray(it)) {
                sg_cfg_fail(c, p,
                            "must be an array of field sources (may be empty: "
                            "scope "
                            "= topic only)");
        } else if (it) {
                size_t n = (size_t)cJSON_GetArraySize(it), i = 0;
                char ip[SG_PATH_SIZE];
                const cJSON *el;

                for (i = 0; i < tc->scope_cnt; i++)
                        sg_cfg_src_clear(&tc->scope[i]);
                free(tc->scope);
                tc->scope = NULL;
                tc->scope_cnt = 0;
                if (n > 0) {
                        if (!(tc->scope = calloc(n, sizeof(*tc->scope))))
                                return sg_cfg_nomem(c);
                        tc->scope_cnt = n;
                }
                i = 0;
                cJSON_ArrayForEach(el, it) {
                        /* n counted these elements (scan-build cannot know
                         * cJSON's count and list agree) */
                        assert(i < tc->scope_cnt);
                        sg_cfg_path_idx(ip, p, i);
                        err = sg_cfg_src_from_json(c, el, ip, &tc->scope[i]);
                        if (!err && tc->format == SG_FORMAT_JSON)
                                err = no_ce(c, ip, &tc->scope[i]);
                        KEEP(err);
                        i++;
                }
        }

        if (tc->format == SG_FORMAT_JSON) {
                static const char *const keys[] = {"id", "aggregate", "version",
                                                   "type"};
                const sg_field_src_t *srcs[] = {&tc->id, &tc->aggregate,
                                                &tc->version, &tc->type};
                /* only what the file says: a key absent, or one whose
                 * text did not parse (reported), still holds its
                 * CloudEvents default, which is not the user's mistake */
                for (size_t i = 0; i < 4; i++) {
                        const cJSON *w =
                                cJSON_GetObjectItemCaseSensitive(env, keys[i]);
                        if (!cJSON_IsString(w) ||
                            strncmp(w->valuestring, "ce:", 3))
                                continue;
                        sg_cfg_path_key(p, path, keys[i]);
                        KEEP(no_ce(c, p, srcs[i]));
                }
        }

        sg_cfg_path_key(p, path, "digest");
        if ((it = cJSON_GetObjectItemCaseSensitive(env, "digest"))) {
                if (!cJSON_IsString(it))
                        sg_cfg_fail(
                                c, p,
                                "must be a string; allowed: \"value\" (SHA-256 "
                                "of the record value) or a JSON Pointer such "
                                "as "
                                "\"/data\"");
                else if (strcmp(it->valuestring, "value") &&
                         !sg_cfg_valid_pointer(it->valuestring))
                        sg_cfg_fail(
                                c, p,
                                "\"%.*s\" is not allowed; allowed: \"value\" "
                                "or "
                                "a JSON Pointer (RFC 6901) such as \"/data\"",
                                SG_QUOTE_MAX, it->valuestring);
                /* A CloudEvent's payload is its data (semantics §2; in
                 * binary mode the record value): a pointer elsewhere would
                 * digest attributes only and judge different payloads
                 * duplicates. */
                else if (strcmp(it->valuestring, "value") &&
                         tc->format == SG_FORMAT_CLOUDEVENTS &&
                         strcmp(it->valuestring, "/data") != 0 &&
                         strncmp(it->valuestring, "/data/", 6) != 0)
                        sg_cfg_fail(c, p,
                                    "\"%.*s\" is not allowed with format "
                                    "\"cloudevents\"; allowed: \"value\", "
                                    "\"/data\" "
                                    "or a JSON Pointer into it (\"/data/...\")",
                                    SG_QUOTE_MAX, it->valuestring);
                else if (strcmp(it->valuestring, "value") &&
                         !(tc->digest_pointer = strdup(it->valuestring)))
                        return sg_cfg_nomem(c);
        }

        KEEP(sg_cfg_read(c, env, path, SECT_ENVELOPE_MAX, tc));
        return errors_since(c, since);
}

static sg_err_t parse_ordering(cfg_ctx_t *c, const cJSON *ord, const char *path,
                               sg_topic_config_t *tc) {
        size_t since = c->err_cnt;
        sg_err_t err;

        if ((err = sg_cfg_expect_object(c, ord, path)))
                return err;
        KEEP(sg_cfg_check_keys(c, ord, path, ORDERING_KEYS));

        KEEP(sg_cfg_read(c, ord, path, SECT_ORDERING, tc));

        /* Semantics §4 "Which clock": under gap_policy hold nothing ends a
         * gap's wait but a snapshot or an operator's release, and a
         * release is a record of the same partition: a partition paused
         * at a cap would never read it. So hold dead-letters past a cap
         * (park_overflow) by default, and refuses pause. */
        if (tc->gap_policy == SG_GAP_HOLD) {
                const cJSON *ov = cJSON_GetObjectItemCaseSensitive(
                        ord, "on_park_overflow");
                if (!ov) {
                        tc->on_park_overflow = SG_OVERFLOW_DLQ;
                } else if (tc->on_park_overflow == SG_OVERFLOW_PAUSE) {
                        char p[SG_PATH_SIZE];
                        sg_cfg_path_key(p, path, "on_park_overflow");
                        sg_cfg_fail(c, p,
                                    "\"pause\" is not allowed with gap_policy "
                                    "\"hold\": a gap that fills a cap would "
                                    "stop the partition for good (no "
                                    "deadline ends it, and a release record "
                                    "would wait behind the paused one); use "
                                    "\"dlq\" (the default under hold)");
                }
        }

        if (tc->max_parked_per_aggregate > tc->max_parked_total) {
                char p[SG_PATH_SIZE];
                sg_cfg_path_key(p, path, "max_parked_per_aggregate");
                sg_cfg_fail(
                        c, p,
                        "must be <= max_parked_total (%" PRIu64 "): the "
                        "per-aggregate cap is part of the per-partition total",
                        tc->max_parked_total);
        }
        return errors_since(c, since);
}

static bool sm_has_state(const sg_state_machine_t *sm, const char *s) {
        for (size_t i = 0; i < sm->state_cnt; i++)
                if (sm->states[i] && !strcmp(sm->states[i], s))
                        return true;
        return false;
}

/** Fails unless @p it is a state of @p sm. */
static sg_err_t sm_state_ref(cfg_ctx_t *c, const sg_state_machine_t *sm,
                             const cJSON *it, const char *path) {
        char list[1024];

        if (!cJSON_IsString(it) || !*it->valuestring)
                return sg_cfg_fail(c, path, "must be a state name; allowed: %s",
                                   sg_cfg_join_n(list, sizeof(list), sm->states,
                                                 sm->state_cnt));
        if (!sm_has_state(sm, it->valuestring))
                return sg_cfg_fail(
                        c, path,
                        "\"%.*s\" is not a declared state; allowed: %s",
                        SG_QUOTE_MAX, it->valuestring,
                        sg_cfg_join_n(list, sizeof(list), sm->states,
                                      sm->state_cnt));
        return SG_OK;
}

/** Reads a non-empty JSON array member @p key (required). */
static sg_err_t get_array(cfg_ctx_t *c, const cJSON *obj, const char *path,
                          const char *key, const char *what,
                          const cJSON **out) {
        char p[SG_PATH_SIZE];
        const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);

        sg_cfg_path_key(p, path, key);
        if (!it)
                return sg_cfg_fail(c, p, "required key is missing (%s)", what);
        if (!cJSON_IsArray(it) || cJSON_GetArraySize(it) < 1)
                return sg_cfg_fail(c, p, "must be a non-empty array (%s)",
                                   what);
        *out = it;
        return SG_OK;
}

static sg_err_t parse_transition(cfg_ctx_t *c, const cJSON *obj,
                                 const char *path, sg_state_machine_t *sm,
                                 size_t idx) {
        sg_transition_t *t = &sm->transitions[idx];
        char p[SG_PATH_SIZE], ip[SG_PATH_SIZE];
        const cJSON *from = NULL, *el;
        const char *type = NULL;
        size_t i = 0, since = c->err_cnt;
        sg_err_t err;

        if ((err = sg_cfg_expect_object(c, obj, path)))
                return err;
        KEEP(sg_cfg_check_keys(c, obj, path, TRANSITION_KEYS));
        KEEP(sg_cfg_get_str(c, obj, path, "type", true, &type));
        for (size_t j = 0; type && j < idx; j++) {
                if (sm->transitions[j].type &&
                    !strcmp(sm->transitions[j].type, type)) {
                        sg_cfg_path_key(p, path, "type");
                        sg_cfg_fail(
                                c, p,
                                "\"%.*s\" already has a transition; an event "
                                "type moves to one state (list every source "
                                "state in \"from\")",
                                SG_QUOTE_MAX, type);
                        type = NULL;
                        break;
                }
        }
        if (type && !(t->type = strdup(type)))
                return sg_cfg_nomem(c);

        KEEP(get_array(c, obj, path, "from", "states the event may leave",
                       &from));
        sg_cfg_path_key(p, path, "from");
        if (from) {
                if (!(t->from = calloc((size_t)cJSON_GetArraySize(from),
                                       sizeof(*t->from))))
                        return sg_cfg_nomem(c);
                t->from_cnt = (size_t)cJSON_GetArraySize(from);
        }
        for (el = from ? from->child : NULL; el; el = el->next, i++) {
                sg_cfg_path_idx(ip, p, i);
                if (sm_state_ref(c, sm, el, ip))
                        continue;
                bool dup = false;
                for (size_t j = 0; !dup && j < i; j++)
                        dup = t->from[j] &&
                              !strcmp(t->from[j], el->valuestring);
                if (dup)
                        sg_cfg_fail(c, ip, "duplicate state \"%s\"",
                                    el->valuestring);
                else if (!(t->from[i] = strdup(el->valuestring)))
                        return sg_cfg_nomem(c);
        }

        sg_cfg_path_key(p, path, "to");
        el = cJSON_GetObjectItemCaseSensitive(obj, "to");
        if (!el)
                sg_cfg_fail(c, p, "required key is missing");
        else if (!sm_state_ref(c, sm, el, p) &&
                 !(t->to = strdup(el->valuestring)))
                return sg_cfg_nomem(c);
        return errors_since(c, since);
}

static sg_err_t parse_state_machine(cfg_ctx_t *c, const cJSON *obj,
                                    const char *path, sg_state_machine_t *sm) {
        char p[SG_PATH_SIZE], ip[SG_PATH_SIZE];
        const cJSON *states = NULL, *trans = NULL, *el;
        size_t i = 0, since = c->err_cnt;
        sg_err_t err;

        if ((err = sg_cfg_expect_object(c, obj, path)))
                return err;
        KEEP(sg_cfg_check_keys(c, obj, path, SM_KEYS));
        sm->enabled = true;

        /* without its states nothing else can be checked */
        if ((err = get_array(c, obj, path, "states", "the state names",
                             &states)))
                return err;
        sg_cfg_path_key(p, path, "states");
        if (!(sm->states = calloc((size_t)cJSON_GetArraySize(states),
                                  sizeof(*sm->states))))
                return sg_cfg_nomem(c);
        sm->state_cnt = (size_t)cJSON_GetArraySize(states);
        cJSON_ArrayForEach(el, states) {
                sg_cfg_path_idx(ip, p, i);
                if (!cJSON_IsString(el) || !*el->valuestring)
                        sg_cfg_fail(c, ip, "must be a non-empty string");
                else if (sm_has_state(sm, el->valuestring))
                        sg_cfg_fail(c, ip, "duplicate state \"%.*s\"",
                                    SG_QUOTE_MAX, el->valuestring);
                else if (!(sm->states[i] = strdup(el->valuestring)))
                        return sg_cfg_nomem(c);
                /* kept in a fixed-size field of the aggregate's record */
                else if (strlen(sm->states[i]) >= SG_STATE_MAX)
                        sg_cfg_fail(c, p,
                                    "state \"%.32s...\" is longer than %d "
                                    "bytes",
                                    sm->states[i], SG_STATE_MAX - 1);
                i++;
        }

        sg_cfg_path_key(p, path, "initial");
        el = cJSON_GetObjectItemCaseSensitive(obj, "initial");
        if (!el)
                sg_cfg_fail(c, p,
                            "required key is missing (the state of a new "
                            "aggregate)");
        else if (!sm_state_ref(c, sm, el, p) &&
                 !(sm->initial = strdup(el->valuestring)))
                return sg_cfg_nomem(c);

        KEEP(get_array(c, obj, path, "transitions", "objects {type, from, to}",
                       &trans));
        if (!trans)
                return errors_since(c, since);
        sg_cfg_path_key(p, path, "transitions");
        if (!(sm->transitions = calloc((size_t)cJSON_GetArraySize(trans),
                                       sizeof(*sm->transitions))))
                return sg_cfg_nomem(c);
        i = 0;
        cJSON_ArrayForEach(el, trans) {
                sg_cfg_path_idx(ip, p, i);
                /* Count only built entries, so that the duplicate-type scan
                 * in parse_transition sees initialised types. */
                sm->transition_cnt = i + 1;
                KEEP(parse_transition(c, el, ip, sm, i));
                i++;
        }
        return errors_since(c, since);
}

/* output_topic: a topic name, not the input topic */
sg_err_t sg_cfg_check_output_topic(cfg_ctx_t *c, const cJSON *obj,
                                   const char *path, const char *key_path,
                                   void *base) {
        sg_topic_config_t *tc = base;

        (void)obj;
        (void)path;
        KEEP(sg_cfg_check_topic_name(c, key_path, tc->output_topic));
        if (!strcmp(tc->output_topic, tc->name))
                sg_cfg_fail(c, key_path,
                            "must differ from the input topic \"%s\"",
                            tc->name);
        return SG_OK;
}

/* dlq_topic: a topic name, neither the input nor the output topic */
sg_err_t sg_cfg_check_dlq_topic(cfg_ctx_t *c, const cJSON *obj,
                                const char *path, const char *key_path,
                                void *base) {
        sg_topic_config_t *tc = base;

        (void)obj;
        (void)path;
        KEEP(sg_cfg_check_topic_name(c, key_path, tc->dlq_topic));
        if (!strcmp(tc->dlq_topic, tc->name))
                sg_cfg_fail(c, key_path,
                            "must differ from the input topic \"%s\"",
                            tc->name);
        else if (tc->output_topic && !strcmp(tc->dlq_topic, tc->output_topic))
                sg_cfg_fail(c, key_path,
                            "must differ from output_topic \"%s\": refused "
                            "records must not reach the output's consumers",
                            tc->output_topic);
        return SG_OK;
}

/* changelog_topic: a topic of its own */
sg_err_t sg_cfg_check_changelog_topic(cfg_ctx_t *c, const cJSON *obj,
                                      const char *path, const char *key_path,
                                      void *base) {
        sg_topic_config_t *tc = base;

        (void)obj;
        (void)path;
        KEEP(sg_cfg_check_topic_name(c, key_path, tc->changelog_topic));
        if (!strcmp(tc->changelog_topic, tc->name) ||
            (tc->output_topic &&
             !strcmp(tc->changelog_topic, tc->output_topic)) ||
            (tc->dlq_topic && !strcmp(tc->changelog_topic, tc->dlq_topic)))
                sg_cfg_fail(c, key_path,
                            "must differ from the input, output and DLQ "
                            "topics: it holds seqgate's state");
        return SG_OK;
}

static sg_err_t parse_topic(cfg_ctx_t *c, const cJSON *obj, const char *path,
                            sg_topic_config_t *tc) {
        char p[SG_PATH_SIZE];
        const cJSON *it;
        size_t since = c->err_cnt;
        sg_err_t err;

        if ((err = sg_cfg_expect_object(c, obj, path)))
                return err;
        KEEP(sg_cfg_check_keys_in(c, obj, path, TOPIC_KEYS, TOPIC_BLOCKS));
        if ((err = topic_defaults(c, tc)))
                return err;
        if (!(tc->name = strdup(obj->string)))
                return sg_cfg_nomem(c);

        KEEP(sg_cfg_read(c, obj, path, SECT_TOPIC, tc));

        sg_cfg_path_key(p, path, "envelope");
        if ((it = cJSON_GetObjectItemCaseSensitive(obj, "envelope")))
                KEEP(parse_envelope(c, it, p, tc));

        sg_cfg_path_key(p, path, "dedup");
        if ((it = cJSON_GetObjectItemCaseSensitive(obj, "dedup")) &&
            !sg_cfg_expect_object(c, it, p)) {
                KEEP(sg_cfg_check_keys(c, it, p, DEDUP_KEYS));
                KEEP(sg_cfg_read(c, it, p, SECT_DEDUP, tc));
        }

        sg_cfg_path_key(p, path, "ordering");
        const cJSON *ord = cJSON_GetObjectItemCaseSensitive(obj, "ordering");
        if (ord)
                KEEP(parse_ordering(c, ord, p, tc));

        sg_cfg_path_key(p, path, "state_machine");
        if ((it = cJSON_GetObjectItemCaseSensitive(obj, "state_machine")))
                KEEP(parse_state_machine(c, it, p, &tc->sm));

        sg_cfg_path_key(p, path, "snapshot");
        if ((it = cJSON_GetObjectItemCaseSensitive(obj, "snapshot")))
                KEEP(sg_cfg_parse_snapshot(c, it, p, tc));

        /* The aggregate id goes into a snapshot request whose size the
         * snapshot sources bound (snapshot refetch, semantics §4). */
        if (tc->snapshot.source != SG_SNAP_NONE && tc->max_field_bytes > 1024) {
                sg_cfg_path_key(p, path, "envelope.max_field_bytes");
                sg_cfg_fail(c, p,
                            "at most 1024 with a snapshot source (the "
                            "aggregate id is kept in the snapshot request)");
        }
        /* Cross-field rules (semantics §2, §3b, §4), on the values read (a
         * wrong one kept its default); the first one that fails is said,
         * the others would mostly repeat its cause. The snapshot rules come
         * first: their message names the snapshot, which is why the user
         * asked for strict ordering. */
        if (tc->snapshot.source != SG_SNAP_NONE) {
                sg_cfg_path_key(p, path, "snapshot");
                if (tc->order_mode != SG_ORDER_STRICT)
                        return sg_cfg_fail(
                                c, p,
                                "needs ordering.mode \"strict\" (now "
                                "\"%s\"): only strict ordering waits for "
                                "a missing version; latest_wins and none "
                                "never park, so no gap is left to resolve "
                                "(semantics §3b, §4)",
                                sg_cfg_mode_names[tc->order_mode]);
                if (tc->version.kind == SG_SRC_NONE ||
                    tc->aggregate.kind == SG_SRC_NONE)
                        return sg_cfg_fail(
                                c, p,
                                "needs envelope.%s: a snapshot is fetched "
                                "per aggregate and judged by its version "
                                "(semantics §4)",
                                tc->version.kind == SG_SRC_NONE ? "version"
                                                                : "aggregate");
        }
        if (tc->order_mode != SG_ORDER_NONE) {
                bool explicit_mode =
                        ord && cJSON_GetObjectItemCaseSensitive(ord, "mode");
                const char *need = tc->version.kind == SG_SRC_NONE ? "version"
                                   : tc->aggregate.kind == SG_SRC_NONE
                                           ? "aggregate"
                                           : NULL;
                if (need) {
                        sg_cfg_path_key(p, path, "ordering.mode");
                        return sg_cfg_fail(
                                c, p,
                                "\"%s\"%s needs envelope.%s; a dedup-only "
                                "topic sets ordering.mode \"none\"",
                                sg_cfg_mode_names[tc->order_mode],
                                explicit_mode ? "" : " (the default)", need);
                }
        }
        /* semantics §4b: an epoch fences versions, so it needs them */
        if (tc->epoch.kind != SG_SRC_NONE) {
                sg_cfg_path_key(p, path, "ordering.epoch");
                if (tc->order_mode == SG_ORDER_NONE)
                        return sg_cfg_fail(
                                c, p,
                                "needs ordering.mode \"strict\" or "
                                "\"latest_wins\": an epoch fences lower "
                                "epochs' versions (semantics §4b)");
                if (tc->format == SG_FORMAT_JSON)
                        KEEP(no_ce(c, p, &tc->epoch));
        }
        if (tc->sm.enabled) {
                sg_cfg_path_key(p, path, "state_machine");
                if (tc->type.kind == SG_SRC_NONE)
                        return sg_cfg_fail(
                                c, p,
                                "needs envelope.type (the event type "
                                "selects the transition)");
                if (tc->order_mode == SG_ORDER_NONE)
                        return sg_cfg_fail(
                                c, p,
                                "needs ordering.mode \"strict\" or "
                                "\"latest_wins\" (mode \"none\" applies "
                                "every record; semantics §3b)");
        }
        return errors_since(c, since);
}

/** A topic whose required names were read (the cross-topic rules skip the
 *  others: their errors were reported). */
bool sg_cfg_topic_named(const sg_topic_config_t *tc) {
        return tc->name && tc->output_topic && tc->dlq_topic;
}

sg_err_t sg_cfg_parse_topics(cfg_ctx_t *c, const cJSON *root,
                             sg_config_t *conf) {
        char p[SG_PATH_SIZE];
        const cJSON *topics = cJSON_GetObjectItemCaseSensitive(root, "topics");
        size_t n = 0, i = 0, since = c->err_cnt;
        sg_err_t err;

        if (!topics)
                return sg_cfg_fail(c, "topics",
                                   "required key is missing (an object "
                                   "of input topic name -> settings)");
        if ((err = sg_cfg_expect_object(c, topics, "topics")))
                return err;
        KEEP(sg_cfg_check_keys(c, topics, "topics", NULL));
        for (const cJSON *it = topics->child; it; it = it->next)
                n++;
        if (n == 0)
                return sg_cfg_fail(c, "topics",
                                   "must name at least one input topic");
        if (!(conf->topics = calloc(n, sizeof(*conf->topics))))
                return sg_cfg_nomem(c);
        conf->topic_cnt = n;
        for (const cJSON *it = topics->child; it; it = it->next, i++) {
                sg_cfg_path_topic(p, it->string);
                KEEP(sg_cfg_check_topic_name(c, p, it->string));
                KEEP(parse_topic(c, it, p, &conf->topics[i]));
        }

        /* An output or DLQ topic that is also another topic's input
         * would feed seqgate its own output (its own input: the key's
         * check, sg_cfg_check_output_topic, said so already). */
        for (i = 0; i < n; i++) {
                const sg_topic_config_t *tc = &conf->topics[i];
                if (!sg_cfg_topic_named(tc))
                        continue;
                for (size_t j = 0; j < n; j++) {
                        const char *in = j == i ? NULL : conf->topics[j].name;
                        const char *which =
                                !in                             ? NULL
                                : !strcmp(tc->output_topic, in) ? "output_topic"
                                : !strcmp(tc->dlq_topic, in)    ? "dlq_topic"
                                                                : NULL;
                        if (!which)
                                continue;
                        char tp[SG_PATH_SIZE];
                        sg_cfg_path_topic(tp, tc->name);
                        sg_cfg_path_key(p, tp, which);
                        sg_cfg_fail(
                                c, p,
                                "\"%s\" is also an input topic; seqgate would "
                                "read its own output",
                                in);
                        break;
                }
        }
        /* Default changelog names, as Kafka Streams names its changelogs:
         * <application (group) id>-<store>-changelog. Without a group id
         * (reported) there is no default. */
        for (i = 0; conf->group_id && i < n; i++) {
                sg_topic_config_t *tc = &conf->topics[i];
                if (tc->changelog_topic || !tc->name)
                        continue;
                size_t len = strlen(conf->group_id) + strlen(tc->name) + 12;
                if (!(tc->changelog_topic = malloc(len)))
                        return sg_cfg_nomem(c);
                snprintf(tc->changelog_topic, len, "%s-%s-changelog",
                         conf->group_id, tc->name);
                /* both guarantees keep a changelog (semantics §6) */
                if (!sg_cfg_valid_topic_name(tc->changelog_topic)) {
                        char tp[SG_PATH_SIZE];
                        sg_cfg_path_topic(tp, tc->name);
                        sg_cfg_path_key(p, tp, "changelog_topic");
                        sg_cfg_fail(
                                c, p,
                                "the default name \"%.60s...\" is not a valid "
                                "topic name; set changelog_topic",
                                tc->changelog_topic);
                }
        }
        /* each pair once, at the first of the two */
        for (i = 0; i < n; i++)
                for (size_t j = i + 1; j < n; j++) {
                        if (!conf->topics[i].changelog_topic ||
                            !conf->topics[j].changelog_topic ||
                            strcmp(conf->topics[i].changelog_topic,
                                   conf->topics[j].changelog_topic))
                                continue;
                        char tp[SG_PATH_SIZE];
                        sg_cfg_path_topic(tp, conf->topics[i].name);
                        sg_cfg_path_key(p, tp, "changelog_topic");
                        sg_cfg_fail(
                                c, p,
                                "\"%s\" is also the changelog of topic \"%s\"; "
                                "each input topic needs its own",
                                conf->topics[i].changelog_topic,
                                conf->topics[j].name);
                }
        KEEP(sg_cfg_check_snapshot_topics(c, conf));
        return errors_since(c, since);
}
