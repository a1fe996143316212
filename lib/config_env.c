/*
 * config_env.c — environment variables in the configuration file
 * (docs/configuration.md "Secrets and environment variables"): `${VAR}`
 * references in string values, substituted once at load with Docker Compose's
 * rules, and the record of which values came from the environment so that they
 * are redacted like secrets wherever seqgate prints them.
 *
 * Grammar (Docker Compose's interpolation, braced forms only):
 *   $$                  a literal '$'
 *   ${VAR}              VAR's value; an error when VAR is not set
 *   ${VAR:-default}     default when VAR is unset or empty
 *   ${VAR-default}      default when VAR is unset
 *   ${VAR:?message}     an error (with message) when VAR is unset or empty
 *   ${VAR?message}      an error (with message) when VAR is unset
 *   ${VAR:+alternate}   alternate when VAR is set and not empty, else ""
 *   ${VAR+alternate}    alternate when VAR is set, else ""
 * VAR is [A-Za-z_][A-Za-z0-9_]*; default, message and alternate may hold
 * references of their own. A '$' followed by anything else is kept as
 * written ($VAR without braces is not a reference). Only string values are
 * interpolated: object member names, numbers and booleans are not.
 *
 * A reference text is never quoted in an error (the value around it may be
 * a secret written into the file); the error names the key path and the
 * variable.
 */
#include "config_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/** Values shorter than this are scrubbed from free text only where they
 *  stand quoted ("v"): a bare "1" would erase every digit of a log line. */
#define REDACT_MIN_BARE 4

/** A text being written: a memory stream (open_memstream). */
typedef struct buf {
        char *p;
        size_t len;
        FILE *f;
} buf_t;

static bool buf_open(buf_t *b) {
        b->p = NULL;
        b->len = 0;
        b->f = open_memstream(&b->p, &b->len);
        return b->f != NULL;
}

static bool buf_put(buf_t *b, const char *s, size_t n) {
        return n == 0 || fwrite(s, 1, n, b->f) == n;
}

/** Ends the writing: b->p is the NUL-terminated text (the caller frees
 *  it); false when out of memory (nothing to free). */
static bool buf_close(buf_t *b) {
        bool ok = !ferror(b->f);

        ok = fclose(b->f) == 0 && ok;
        b->f = NULL;
        if (!ok) {
                free(b->p);
                b->p = NULL;
        }
        return ok;
}

static bool push_str(char ***arr, size_t *cnt, size_t *cap, char *s) {
        if (*cnt == *cap) {
                size_t n = *cap ? *cap * 2 : 8;
                char **a = realloc(*arr, n * sizeof(*a));
                if (!a)
                        return false;
                *arr = a;
                *cap = n;
        }
        (*arr)[(*cnt)++] = s;
        return true;
}

/** Adds a text to be redacted (a copy). */
static sg_err_t add_redact(cfg_ctx_t *c, const char *s, size_t n) {
        cfg_env_t *e = &c->env;
        char *d;

        if (n == 0)
                return SG_OK;
        for (size_t i = 0; i < e->redact_cnt; i++)
                if (strlen(e->redact[i]) == n && !memcmp(e->redact[i], s, n))
                        return SG_OK;
        if (!(d = strndup(s, n)) ||
            !push_str(&e->redact, &e->redact_cnt, &e->redact_cap, d)) {
                free(d);
                return sg_cfg_nomem(c);
        }
        /* longest first: a value that holds another is replaced whole */
        for (size_t i = e->redact_cnt - 1;
             i > 0 && strlen(e->redact[i - 1]) < n; i--) {
                e->redact[i] = e->redact[i - 1];
                e->redact[i - 1] = d;
        }
        return SG_OK;
}

static bool name_start(char ch) {
        return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
               ch == '_';
}

static bool name_char(char ch) {
        return name_start(ch) || (ch >= '0' && ch <= '9');
}

/** The end of the word that starts at @p s: the '}' that closes the
 *  reference (nested "${...}" skipped), or NULL if there is none. */
static const char *word_end(const char *s) {
        int depth = 0;

        for (; *s; s++) {
                if (s[0] == '$' && s[1] == '$') {
                        s++;
                } else if (s[0] == '$' && s[1] == '{') {
                        depth++;
                        s++;
                } else if (*s == '}') {
                        if (depth == 0)
                                return s;
                        depth--;
                }
        }
        return NULL;
}

static sg_err_t expand(cfg_ctx_t *c, const char *path, const char *s, size_t n,
                       buf_t *out, bool *from_env);

/** Expands one reference starting at @p s ("${"); *@p next is set past
 *  its '}'. */
static sg_err_t expand_ref(cfg_ctx_t *c, const char *path, const char *s,
                           const char *end, size_t at, buf_t *out,
                           bool *from_env, const char **next) {
        const char *name = s + 2, *q = name, *close;
        char var[256];
        sg_err_t err;

        while (q < end && name_char(*q))
                q++;
        close = word_end(q);
        if (!close || close >= end)
                return sg_cfg_fail(c, path,
                                   "unterminated reference \"${\" at "
                                   "character %zu: write ${NAME} or $$ for a "
                                   "literal '$'",
                                   at + 1);
        if (q == name || !name_start(*name) ||
            (size_t)(q - name) >= sizeof(var))
                return sg_cfg_fail(c, path,
                                   "malformed reference at character %zu: a "
                                   "variable name is [A-Za-z_][A-Za-z0-9_]* "
                                   "(${NAME}, ${NAME:-default}); write $$ for "
                                   "a literal '$'",
                                   at + 1);
        memcpy(var, name, (size_t)(q - name));
        var[q - name] = '\0';
        *next = close + 1;

        const char *val = getenv(var);
        bool colon = *q == ':';
        const char *op = q + colon;
        bool unset = !val, empty = !val || !*val;
        bool missing = colon ? empty : unset;

        if (op == close && !colon) { /* ${VAR} */
                if (unset)
                        return sg_cfg_fail(c, path,
                                           "environment variable %s is not "
                                           "set (write ${%s:-default} for a "
                                           "default)",
                                           var, var);
        } else if (op < close && (*op == '-' || *op == '?' || *op == '+')) {
                const char *w = op + 1;
                size_t wn = (size_t)(close - w);
                if (*op == '-' && missing)
                        return expand(c, path, w, wn, out, from_env);
                if (*op == '+')
                        return missing ? SG_OK
                                       : expand(c, path, w, wn, out, from_env);
                if (*op == '?' && missing) {
                        buf_t msg;
                        bool menv = false;
                        if (!buf_open(&msg))
                                return sg_cfg_nomem(c);
                        err = expand(c, path, w, wn, &msg, &menv);
                        if (!buf_close(&msg))
                                return sg_cfg_nomem(c);
                        if (!err)
                                sg_cfg_fail(c, path,
                                            "environment variable %s is not "
                                            "set%s%s%s",
                                            var, colon ? " or empty" : "",
                                            msg.len ? ": " : "",
                                            msg.len && !menv ? msg.p : "");
                        free(msg.p);
                        return err ? err : SG_ERR_CONFIG;
                }
        } else {
                return sg_cfg_fail(c, path,
                                   "malformed reference at character %zu: "
                                   "after the variable name %s comes '}', "
                                   "\":-\", \"-\", \":?\", \"?\", \":+\" or "
                                   "\"+\"",
                                   at + 1, var);
        }
        *from_env = true;
        if (!buf_put(out, val, strlen(val)))
                return sg_cfg_nomem(c);
        return add_redact(c, val, strlen(val));
}

/** Appends the expansion of @p s (@p n bytes) to @p out. */
static sg_err_t expand(cfg_ctx_t *c, const char *path, const char *s, size_t n,
                       buf_t *out, bool *from_env) {
        const char *end = s + n, *lit = s;
        sg_err_t err;

        for (const char *p = s; p < end;) {
                if (p[0] != '$' || p + 1 >= end ||
                    (p[1] != '$' && p[1] != '{')) {
                        p++;
                        continue;
                }
                if (!buf_put(out, lit, (size_t)(p - lit)))
                        return sg_cfg_nomem(c);
                if (p[1] == '$') {
                        if (!buf_put(out, "$", 1))
                                return sg_cfg_nomem(c);
                        lit = p += 2;
                        continue;
                }
                if ((err = expand_ref(c, path, p, end, (size_t)(p - s), out,
                                      from_env, &p)))
                        return err;
                lit = p;
        }
        if (!buf_put(out, lit, (size_t)(end - lit)))
                return sg_cfg_nomem(c);
        return SG_OK;
}

/** Interpolates one string node; records it when it had a reference. */
static sg_err_t interpolate_node(cfg_ctx_t *c, cJSON *node, const char *path) {
        cfg_env_t *e = &c->env;
        const char *raw = node->valuestring;
        buf_t out;
        bool from_env = false;
        size_t since = c->err_cnt;
        sg_err_t err;

        if (!strstr(raw, "$$") && !strstr(raw, "${"))
                return SG_OK;
        if (!buf_open(&out))
                return sg_cfg_nomem(c);
        err = expand(c, path, raw, strlen(raw), &out, &from_env);
        if (!buf_close(&out))
                return sg_cfg_nomem(c);
        if (err == SG_ERR_NOMEM) {
                free(out.p);
                return err;
        }
        if (e->node_cnt == e->node_cap) {
                size_t cap = e->node_cap ? e->node_cap * 2 : 8;
                cfg_env_node_t *a = realloc(e->nodes, cap * sizeof(*a));
                if (!a) {
                        free(out.p);
                        return sg_cfg_nomem(c);
                }
                e->nodes = a;
                e->node_cap = cap;
        }
        cfg_env_node_t *rec = &e->nodes[e->node_cnt];
        *rec = (cfg_env_node_t){.node = node, .from_env = from_env};
        if (!(rec->raw = strdup(raw))) {
                free(out.p);
                return sg_cfg_nomem(c);
        }
        e->node_cnt++;
        if (c->err_cnt > since) {
                /* the value stays as written; what else is said about it
                 * would be a consequence of this error (sg_cfg_fail) */
                char *p = strdup(path);
                free(out.p);
                if (!p || !push_str(&e->bad, &e->bad_cnt, &e->bad_cap, p)) {
                        free(p);
                        return sg_cfg_nomem(c);
                }
                return SG_ERR_CONFIG;
        }
        if (from_env && (err = add_redact(c, out.p, out.len))) {
                free(out.p);
                return err;
        }
        /* cJSON_SetValuestring() copies only into a shorter string in
         * place; set the node's string directly (cJSON_Delete frees it). */
        free(node->valuestring);
        node->valuestring = out.p;
        return SG_OK;
}

static sg_err_t interpolate(cfg_ctx_t *c, cJSON *node, const char *path) {
        char p[SG_PATH_SIZE];
        size_t i = 0;

        for (; node; node = node->next, i++) {
                if (node->string)
                        sg_cfg_path_key(p, path, node->string);
                else
                        sg_cfg_path_idx(p, path, i);
                if (cJSON_IsString(node) && node->valuestring)
                        KEEP(interpolate_node(c, node, p));
                else if (node->child)
                        KEEP(interpolate(c, node->child, p));
        }
        return SG_OK;
}

sg_err_t sg_cfg_interpolate(cfg_ctx_t *c, cJSON *root) {
        size_t since = c->err_cnt;

        if (cJSON_IsString(root) && root->valuestring)
                KEEP(interpolate_node(c, root, "(root)"));
        else if (root->child)
                KEEP(interpolate(c, root->child, ""));
        return errors_since(c, since);
}

const char *sg_cfg_env_raw(const cfg_ctx_t *c, const cJSON *node) {
        for (size_t i = 0; node && i < c->env.node_cnt; i++)
                if (c->env.nodes[i].node == node)
                        return c->env.nodes[i].raw;
        return NULL;
}

bool sg_cfg_from_env(const cfg_ctx_t *c, const cJSON *node) {
        for (size_t i = 0; node && i < c->env.node_cnt; i++)
                if (c->env.nodes[i].node == node)
                        return c->env.nodes[i].from_env;
        return false;
}

bool sg_cfg_env_failed(const cfg_ctx_t *c, const char *path) {
        for (size_t i = 0; i < c->env.bad_cnt; i++)
                if (!strcmp(c->env.bad[i], path))
                        return true;
        return false;
}

void sg_cfg_env_free(cfg_env_t *e) {
        for (size_t i = 0; i < e->node_cnt; i++)
                free(e->nodes[i].raw);
        free(e->nodes);
        for (size_t i = 0; i < e->redact_cnt; i++)
                free(e->redact[i]);
        free(e->redact);
        for (size_t i = 0; i < e->bad_cnt; i++)
                free(e->bad[i]);
        free(e->bad);
        memset(e, 0, sizeof(*e));
}

/* ------------------------------------------------------------------------ */
/* Redaction                                                                */
/* ------------------------------------------------------------------------ */

/** Where @p secret next stands in @p s as a redactable occurrence: anywhere
 *  when it is long enough, else only between double quotes. */
static const char *find_secret(const char *s, const char *secret, size_t sl,
                               const char *start) {
        for (const char *q = strstr(start, secret); q;
             q = strstr(q + 1, secret)) {
                if (sl >= REDACT_MIN_BARE ||
                    (q > s && q[-1] == '"' && q[sl] == '"'))
                        return q;
        }
        return NULL;
}

char *sg_config_redact_text(const char *s, const char *secret) {
        size_t sl = secret ? strlen(secret) : 0, n = 0;

        if (!s || !sl)
                return NULL;
        for (const char *q = find_secret(s, secret, sl, s); q;
             q = find_secret(s, secret, sl, q + sl))
                n++;
        if (!n)
                return NULL;
        char *out = malloc(strlen(s) + n * 3 + 1), *o = out;
        if (!out)
                return NULL;
        const char *from = s;
        for (const char *q = find_secret(s, secret, sl, s); q;
             q = find_secret(s, secret, sl, q + sl)) {
                memcpy(o, from, (size_t)(q - from));
                o += q - from;
                memcpy(o, "***", 3);
                o += 3;
                from = q + sl;
        }
        strcpy(o, from);
        return out;
}

bool sg_config_kv_secret(const sg_kv_t *kv) {
        return kv && (kv->from_env || sg_config_is_secret(kv->name));
}
