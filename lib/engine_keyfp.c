/*
 * engine_keyfp.c — the key fingerprint (semantics §3 "Key fingerprint").
 *
 * A store's dedup records are keyed by the idempotency key and hold the
 * payload digest; its aggregate records are keyed by the aggregate id. The
 * settings that define them (envelope format, id, scope, digest pointer,
 * aggregate) are fingerprinted per partition in its meta record, and so in
 * the changelog. A configuration that changes any of them would silently
 * turn every benign retry into an idempotency_conflict (or a duplicate into
 * a new event): such a store is refused at assignment and after a restore
 * (SG_ERR_CONFIG, naming the settings) unless the operator started seqgate
 * with --accept-key-change, which adopts the new fingerprint.
 * sg_eng_fp_check (engine_int.h) is called by the assignment and the
 * restore (engine.c, engine_changelog.c).
 */
#include "engine_int.h"

#include "envelope.h"
#include "json.h" /* SG_JSON_CANONICAL_FORM */

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static const char *const fp_names[SG_META_FP_PARTS] = {
        "envelope.format", "envelope.id",        "envelope.scope",
        "envelope.digest", "envelope.aggregate",
};

static void fp_part(unsigned char out[8], const char *text, size_t len) {
        unsigned char h[32];
        sg_sha256(text, len, h);
        memcpy(out, h, 8);
}

/* "kind:name" of a field source, in @p buf. */
static size_t fp_field(char *buf, size_t n, const sg_field_src_t *f) {
        int l = snprintf(buf, n, "%d:%s", (int)f->kind, f->name ? f->name : "");
        return l < 0 ? 0 : (size_t)l < n ? (size_t)l : n - 1;
}

static void fp_compute(const sg_topic_config_t *tc,
                       unsigned char out[SG_META_FP_PARTS][8]) {
        char buf[4096];
        size_t l = (size_t)snprintf(buf, sizeof(buf), "%d", (int)tc->format);
        fp_part(out[0], buf, l);
        l = fp_field(buf, sizeof(buf), &tc->id);
        fp_part(out[1], buf, l);
        l = 0;
        for (size_t i = 0; i < tc->scope_cnt && l < sizeof(buf) - 1; i++) {
                /* length-prefixed, as the key itself is */
                char one[1024];
                size_t ol = fp_field(one, sizeof(one), &tc->scope[i]);
                int w = snprintf(buf + l, sizeof(buf) - l, "%zu:%s;", ol, one);
                if (w < 0)
                        break;
                l += (size_t)w < sizeof(buf) - l ? (size_t)w
                                                 : sizeof(buf) - l - 1;
        }
        fp_part(out[2], buf, l);
        /* a digest pointer digests the canonical form: its version counts */
        l = (size_t)snprintf(buf, sizeof(buf), "%s|%d",
                             tc->digest_pointer ? tc->digest_pointer : "",
                             tc->digest_pointer ? SG_JSON_CANONICAL_FORM : 0);
        fp_part(out[3], buf, l < sizeof(buf) ? l : sizeof(buf) - 1);
        l = fp_field(buf, sizeof(buf), &tc->aggregate);
        fp_part(out[4], buf, l);
}

/* Checks @p m's key fingerprint against the configuration. Fills it in
 * when the store has none (written before it existed) or when the operator
 * accepted a change; *changedp tells the caller to write @p m back.
 * SG_ERR_CONFIG when the settings differ and no change was accepted. */
sg_err_t sg_eng_fp_check(sg_engine_t *e, const part_t *p, sg_meta_rec_t *m,
                         bool *changedp, char *errstr, size_t errstr_size) {
        unsigned char cur[SG_META_FP_PARTS][8];
        fp_compute(p->tc, cur);
        *changedp = false;
        if (!m->has_key_fp) {
                memcpy(m->key_fp, cur, sizeof(cur));
                m->has_key_fp = true;
                *changedp = true;
                return SG_OK;
        }
        char names[1536] = ""; /* SG_META_FP_PARTS key paths */
        size_t nl = 0;
        for (size_t i = 0; i < SG_META_FP_PARTS; i++) {
                if (memcmp(m->key_fp[i], cur[i], 8) == 0)
                        continue;
                /* each by its full key path, as the config's errors name
                 * keys: the refusal and key_fingerprint_adopted alike */
                int w = snprintf(names + nl, sizeof(names) - nl,
                                 "%stopics.%s.%s", nl ? ", " : "", p->tc->name,
                                 fp_names[i]);
                if (w > 0 && (size_t)w < sizeof(names) - nl)
                        nl += (size_t)w;
        }
        if (!nl)
                return SG_OK;
        if (!e->conf->accept_key_change) {
                sg_errf(errstr, errstr_size,
                        "store of %s [%" PRId32 "] was written with other "
                        "settings for %s: its idempotency keys, "
                        "digests or aggregate keys would no longer match "
                        "(every retry an idempotency_conflict). Restore the "
                        "old settings, or start once with "
                        "--accept-key-change to adopt the new ones",
                        p->topic, p->partition, names);
                return SG_ERR_CONFIG;
        }
        sg_eng_log(e, SG_LOG_WARNING, "key_fingerprint_adopted", p, "settings",
                   LF_STR, names, NULL);
        memcpy(m->key_fp, cur, sizeof(cur));
        *changedp = true;
        return SG_OK;
}
