/*
 * config_snapshot.c — a topic's "snapshot" block (snapshot refetch,
 * semantics §4 step 1): source, request/reply topics or URL template and
 * Authorization variable, retries; and the rule that snapshot topics are
 * topics of their own.
 */
#include "config_int.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

const char *const sg_cfg_snapshot_keys[] = {
        "source",          "request_topic",  "reply_topic",   "url",
        "auth_header_env", "timeout_ms",     "max_in_flight", "max_attempts",
        "backoff_ms",      "backoff_max_ms", "emit_record",   NULL};
/* SG_SNAP_NONE has no spelling (no "snapshot" block): source = index + 1. */
static const char *const SNAPSHOT_NAMES[] = {"kafka", "http", NULL};

/* ------------------------------------------------------------------------ */
/* Snapshot source (snapshot refetch, semantics §4 step 1)                 */
/* ------------------------------------------------------------------------ */

/**
 * Key names that would put the Authorization value itself into the config
 * file. The value is taken from the environment variable named by
 * auth_header_env only, so that the file can be shared and versioned.
 */
static bool snapshot_secret_key(const char *k) {
        return !strcasecmp(k, "auth_header") ||
               !strcasecmp(k, "authorization") ||
               sg_cfg_contains_ci(k, "token") || sg_config_is_secret(k);
}

/** POSIX-style environment variable name: [A-Za-z_][A-Za-z0-9_]*. */
static bool valid_env_name(const char *s) {
        for (size_t i = 0; s[i]; i++) {
                char ch = s[i];
                bool alpha = (ch >= 'A' && ch <= 'Z') ||
                             (ch >= 'a' && ch <= 'z') || ch == '_';
                if (!alpha && (i == 0 || ch < '0' || ch > '9'))
                        return false;
        }
        return *s != '\0';
}

/**
 * Checks the HTTP URL template. The URL is never quoted back: a query string
 * may hold an API key. Rules: an absolute http or https URL (RFC 3986 §3;
 * schemes are case-insensitive, §3.1) with a host, printable ASCII only
 * (anything else must be percent-encoded, §2.1), no user:password@ written
 * in the file (the config file must hold no secret; credentials given
 * through ${VAR} are allowed, @p raw being the URL as written), and the
 * "{aggregate}" placeholder.
 */
static sg_err_t check_snapshot_url(cfg_ctx_t *c, const char *path,
                                   const char *url, const char *raw) {
        size_t scheme;
        const char *host, *end;

        if (!strncasecmp(url, "http://", 7))
                scheme = 7;
        else if (!strncasecmp(url, "https://", 8))
                scheme = 8;
        else
                return sg_cfg_fail(
                        c, path, "must start with \"http://\" or \"https://\"");
        for (const char *s = url; *s; s++)
                if ((unsigned char)*s <= 0x20 || (unsigned char)*s >= 0x7f)
                        return sg_cfg_fail(
                                c, path,
                                "must not contain spaces, control or "
                                "non-ASCII characters (percent-encode "
                                "them, RFC 3986 §2.1)");
        host = url + scheme;
        end = host + strcspn(host, "/?#");
        if (end == host)
                return sg_cfg_fail(c, path, "needs a host after \"%.*s\"",
                                   (int)scheme, url);
        const char *at = memchr(host, '@', (size_t)(end - host));
        /* credentials from the environment are not in the file: the
         * written user:password@ differs from the one substituted */
        size_t ui = at ? (size_t)(at - url) + 1 : 0;
        if (at && (!raw || strncmp(raw, url, ui) == 0))
                return sg_cfg_fail(
                        c, path,
                        "must not hold credentials (user:password@host) "
                        "written in the file: the config file must contain "
                        "no secret; pass them through the environment "
                        "(\"https://${SNAP_USER}:${SNAP_PASSWORD}@host/"
                        "...\") or put the Authorization header value in an "
                        "environment variable named by auth_header_env");
        if (!strstr(url, "{aggregate}"))
                return sg_cfg_fail(
                        c, path,
                        "must contain \"{aggregate}\" (replaced by the "
                        "percent-encoded aggregate id)");
        return SG_OK;
}

/* snapshot.request_topic (source kafka) */
sg_err_t sg_cfg_check_request_topic(cfg_ctx_t *c, const cJSON *obj,
                                    const char *path, const char *key_path,
                                    void *base) {
        sg_topic_config_t *tc = base;

        (void)obj;
        (void)path;
        KEEP(sg_cfg_check_topic_name(c, key_path, tc->snapshot.request_topic));
        return SG_OK;
}

/* snapshot.reply_topic (source kafka): a topic of its own */
sg_err_t sg_cfg_check_reply_topic(cfg_ctx_t *c, const cJSON *obj,
                                  const char *path, const char *key_path,
                                  void *base) {
        sg_snapshot_config_t *sn = &((sg_topic_config_t *)base)->snapshot;

        (void)obj;
        (void)path;
        KEEP(sg_cfg_check_topic_name(c, key_path, sn->reply_topic));
        if (sn->request_topic && !strcmp(sn->request_topic, sn->reply_topic))
                sg_cfg_fail(c, key_path,
                            "must differ from request_topic \"%s\": "
                            "seqgate consumes the reply topic and would "
                            "read its own requests",
                            sn->request_topic);
        return SG_OK;
}

/* snapshot.url (source http) */
sg_err_t sg_cfg_check_url(cfg_ctx_t *c, const cJSON *obj, const char *path,
                          const char *key_path, void *base) {
        sg_topic_config_t *tc = base;

        (void)obj;
        (void)path;
        KEEP(check_snapshot_url(
                c, key_path, tc->snapshot.url,
                sg_cfg_env_raw(c,
                               cJSON_GetObjectItemCaseSensitive(obj, "url"))));
        return SG_OK;
}

/* snapshot.auth_header_env (source http). Not quoted: a mistaken value may
 * be the secret itself. */
sg_err_t sg_cfg_check_auth_header_env(cfg_ctx_t *c, const cJSON *obj,
                                      const char *path, const char *key_path,
                                      void *base) {
        sg_topic_config_t *tc = base;

        (void)obj;
        (void)path;
        if (!valid_env_name(tc->snapshot.auth_header_env))
                sg_cfg_fail(c, key_path,
                            "must be the NAME of an environment variable "
                            "([A-Za-z_][A-Za-z0-9_]*, e.g. "
                            "\"SEQGATE_SNAPSHOT_AUTH\") whose value is the "
                            "Authorization header; never the header value "
                            "itself");
        return SG_OK;
}

/**
 * Reads a topic's "snapshot" block into tc->snapshot. Topic names are
 * checked here for syntax and request != reply; that they differ from every
 * input, output and DLQ topic is checked by sg_cfg_parse_topics() once all topics
 * are read.
 */
sg_err_t sg_cfg_parse_snapshot(cfg_ctx_t *c, const cJSON *obj, const char *path,
                               sg_topic_config_t *tc) {
        static const char *const kafka_only[] = {"request_topic", "reply_topic",
                                                 NULL};
        static const char *const http_only[] = {"url", "auth_header_env", NULL};
        sg_snapshot_config_t *sn = &tc->snapshot;
        char p[SG_PATH_SIZE];
        const char *const *forbidden;
        const cJSON *it;
        int ival = -1;
        sg_err_t err;

        if ((err = sg_cfg_expect_object(c, obj, path)))
                return err;
        size_t since = c->err_cnt;
        /* Before the unknown-key check, so that the error says why. */
        bool secret_key = false;
        for (it = obj->child; it; it = it->next) {
                if (!snapshot_secret_key(it->string))
                        continue;
                sg_cfg_path_key(p, path, it->string);
                sg_cfg_fail(
                        c, p,
                        "not allowed: the config file must never hold the "
                        "Authorization header value; put it in an environment "
                        "variable and set auth_header_env to that variable's "
                        "name (e.g. \"SEQGATE_SNAPSHOT_AUTH\")");
                secret_key = true;
        }
        /* a secret-looking key is said once, by the rule above */
        if (!secret_key)
                KEEP(sg_cfg_check_keys(c, obj, path, sg_cfg_snapshot_keys));

        /* without a source nothing else can be checked */
        if (!cJSON_GetObjectItemCaseSensitive(obj, "source")) {
                sg_cfg_path_key(p, path, "source");
                return sg_cfg_fail(c, p,
                                   "required key is missing; allowed: kafka "
                                   "(request/reply topics), http (GET on a "
                                   "URL template)");
        }
        if ((err = sg_cfg_get_enum(c, obj, path, "source", SNAPSHOT_NAMES, NULL,
                                   &ival)))
                return err;
        sn->source = (sg_snapshot_source_t)(ival + 1);

        forbidden = sn->source == SG_SNAP_KAFKA ? http_only : kafka_only;
        for (size_t i = 0; forbidden[i]; i++) {
                if (!cJSON_GetObjectItemCaseSensitive(obj, forbidden[i]))
                        continue;
                sg_cfg_path_key(p, path, forbidden[i]);
                sg_cfg_fail(
                        c, p, "not allowed with source \"%s\" (%s)",
                        SNAPSHOT_NAMES[ival],
                        sn->source == SG_SNAP_KAFKA
                                ? "source kafka uses request_topic and "
                                  "reply_topic"
                                : "source http uses url and auth_header_env");
        }

        KEEP(sg_cfg_read(c, obj, path,
                         sn->source == SG_SNAP_KAFKA ? SECT_SNAP_KAFKA
                                                     : SECT_SNAP_HTTP,
                         tc));

        KEEP(sg_cfg_read(c, obj, path, SECT_SNAP_RETRY, tc));
        if (sn->backoff_max_ms < sn->backoff_ms) {
                sg_cfg_path_key(p, path, "backoff_max_ms");
                sg_cfg_fail(c, p,
                            "must be >= backoff_ms (%" PRId64 "): it caps the "
                            "doubling retry delay",
                            sn->backoff_ms);
        }

        KEEP(sg_cfg_read(c, obj, path, SECT_SNAP_OUTPUT, tc));
        return errors_since(c, since);
}

/**
 * Names what @p name already is among the topics of @p conf ("an input
 * topic (topics.X)", "topics.X.output_topic", ...), written into @p buf;
 * NULL when nothing. @p self is the index of the topic whose snapshot topic
 * @p name is. A request topic may be shared by input topics (seqgate only
 * produces to it); a reply topic is consumed by seqgate and routes a reply
 * to its input topic, so it must not be another topic's request or reply
 * topic.
 */
static const char *snapshot_topic_clash(const sg_config_t *conf, size_t self,
                                        bool is_reply, const char *name,
                                        char *buf, size_t size) {
        for (size_t j = 0; j < conf->topic_cnt; j++) {
                const sg_topic_config_t *o = &conf->topics[j];
                bool kafka = o->snapshot.source == SG_SNAP_KAFKA && j != self;
                const char *what = NULL;

                /* a topic whose names were not read had its errors said */
                if (!sg_cfg_topic_named(o))
                        continue;
                /* what it checked (scan-build: it is in config_topic.c) */
                assert(o->name && o->output_topic && o->dlq_topic);
                char tp[SG_PATH_SIZE];
                sg_cfg_path_topic(tp, o->name);
                if (!strcmp(name, o->name)) {
                        snprintf(buf, size, "an input topic (%s)", tp);
                        return buf;
                }
                if (!strcmp(name, o->output_topic))
                        what = "output_topic";
                else if (!strcmp(name, o->dlq_topic))
                        what = "dlq_topic";
                else if (kafka && o->snapshot.reply_topic &&
                         !strcmp(name, o->snapshot.reply_topic))
                        what = "snapshot.reply_topic";
                else if (kafka && is_reply && o->snapshot.request_topic &&
                         !strcmp(name, o->snapshot.request_topic))
                        what = "snapshot.request_topic";
                if (what) {
                        snprintf(buf, size, "%s.%s", tp, what);
                        return buf;
                }
        }
        return NULL;
}

/**
 * Snapshot request and reply topics are topics of their own (snapshot refetch, semantics §4): a
 * reply topic that is also an input, output or DLQ topic would mix replies
 * with events, and a request topic that is one would hand requests to the
 * consumers of events.
 */
sg_err_t sg_cfg_check_snapshot_topics(cfg_ctx_t *c, const sg_config_t *conf) {
        char p[SG_PATH_SIZE], tp[SG_PATH_SIZE], what[SG_PATH_SIZE + 32];
        size_t since = c->err_cnt;

        for (size_t i = 0; i < conf->topic_cnt; i++) {
                const sg_snapshot_config_t *sn = &conf->topics[i].snapshot;

                if (sn->source != SG_SNAP_KAFKA || !conf->topics[i].name)
                        continue;
                sg_cfg_path_topic(tp, conf->topics[i].name);
                for (int r = 0; r < 2; r++) {
                        const char *name =
                                r ? sn->reply_topic : sn->request_topic;
                        const char *clash =
                                name ? snapshot_topic_clash(conf, i, r == 1,
                                                            name, what,
                                                            sizeof(what))
                                     : NULL;
                        if (!clash)
                                continue;
                        sg_cfg_path_key(p, tp,
                                        r ? "snapshot.reply_topic"
                                          : "snapshot.request_topic");
                        sg_cfg_fail(
                                c, p,
                                "\"%s\" is also %s; snapshot request and reply "
                                "topics must be topics of their own",
                                name, clash);
                }
        }
        return errors_since(c, since);
}
