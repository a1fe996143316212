/*
 * http_auth.c — credentials of the HTTP endpoint (http.h, docs/operating.md
 * "HTTP endpoint"), after Prometheus' exporter-toolkit web config:
 * users with bcrypt hashes of their passwords (HTTP Basic, RFC 7617) and
 * bearer tokens kept as SHA-256 digests (RFC 6750).
 *
 * Why each form: a password is chosen by a person and may be guessed, so
 * it is kept as a bcrypt hash (libcrypt's crypt_rn, the hashes htpasswd -B
 * writes), slow on purpose. A bearer token is a random secret of 128 bits
 * or more that nobody guesses: a SHA-256 digest (OpenSSL libcrypto) keeps
 * it out of the configuration as well, and checking it costs nothing —
 * while a bcrypt per token per request would let anyone keep the server's
 * one thread busy with wrong tokens.
 *
 * A bcrypt check takes tens of milliseconds on the server's only thread,
 * where the kubelet's probes are answered too. So, like exporter-toolkit,
 * results are cached (by a digest of user, hash and password: a client
 * that sends the right password each request pays one bcrypt), an unknown
 * user costs a bcrypt as a known one does (no user enumeration by timing),
 * and at most SG_HTTP_BCRYPT_PER_S uncached checks run per second: beyond
 * that a request is 429 at once (a guesser cannot starve the probes).
 *
 * Threads: everything here runs on the HTTP server's thread; the setup
 * before sg_http_start().
 */
#include "http_int.h"

#include <crypt.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CACHE_SIZE 64
#define TOKEN_DIGEST_TEXT 71 /* "sha256:" + 64 hex digits */

typedef struct cached {
        unsigned char key[SHA256_DIGEST_LENGTH];
        bool ok;
        uint64_t used; /* a counter: the least recently used is replaced */
} cached_t;

struct sg_http_auth {
        sg_kv_t *users; /* name, bcrypt hash */
        size_t user_cnt;
        unsigned char (*tokens)[SHA256_DIGEST_LENGTH];
        size_t token_cnt;
        char *dummy; /* a hash of a random password, for unknown users */
        cached_t cache[CACHE_SIZE];
        uint64_t uses;
        double bucket;     /* uncached bcrypt checks left now */
        int64_t refill_ms; /* monotonic time of the last refill */
        struct crypt_data cd;
};

/* ---- the configuration's forms ------------------------------------------ */

static bool b64crypt(char ch) {
        return ch == '.' || ch == '/' || (ch >= '0' && ch <= '9') ||
               (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z');
}

bool sg_http_bcrypt_hash_ok(const char *h) {
        /* $2y$10$ + 22 characters of salt + 31 of hash (bcrypt's own
         * base64 alphabet) */
        if (!h || strlen(h) != 60 || h[0] != '$' || h[1] != '2' ||
            (h[2] != 'a' && h[2] != 'b' && h[2] != 'y') || h[3] != '$' ||
            h[4] < '0' || h[4] > '3' || h[5] < '0' || h[5] > '9' || h[6] != '$')
                return false;
        int cost = (h[4] - '0') * 10 + (h[5] - '0');
        if (cost < 4 || cost > 31)
                return false;
        for (size_t i = 7; i < 60; i++)
                if (!b64crypt(h[i]))
                        return false;
        return true;
}

static int hexval(char ch) {
        if (ch >= '0' && ch <= '9')
                return ch - '0';
        if (ch >= 'a' && ch <= 'f')
                return ch - 'a' + 10;
        if (ch >= 'A' && ch <= 'F')
                return ch - 'A' + 10;
        return -1;
}

bool sg_http_token_hash_ok(const char *h) {
        if (!h || strlen(h) != TOKEN_DIGEST_TEXT || strncmp(h, "sha256:", 7))
                return false;
        for (size_t i = 7; i < TOKEN_DIGEST_TEXT; i++)
                if (hexval(h[i]) < 0)
                        return false;
        return true;
}

/* ---- setup -------------------------------------------------------------- */

sg_http_auth_t *sg_http_auth_new(void) {
        sg_http_auth_t *a = calloc(1, sizeof(*a));
        if (a)
                a->bucket = SG_HTTP_BCRYPT_PER_S;
        return a;
}

void sg_http_auth_free(sg_http_auth_t *a) {
        if (!a)
                return;
        for (size_t i = 0; i < a->user_cnt; i++) {
                free(a->users[i].name);
                free(a->users[i].value);
        }
        free(a->users);
        free(a->tokens);
        free(a->dummy);
        OPENSSL_cleanse(a->cache, sizeof(a->cache));
        free(a);
}

bool sg_http_auth_on(const sg_http_auth_t *a) {
        return a && (a->user_cnt || a->token_cnt);
}

sg_err_t sg_http_auth_user_add(sg_http_auth_t *a, const char *user,
                               const char *hash, char *errstr,
                               size_t errstr_size) {
        if (!user || !*user || strchr(user, ':') ||
            !sg_http_bcrypt_hash_ok(hash)) {
                sg_errf(errstr, errstr_size,
                        "basic auth user \"%s\": a name without ':' and a "
                        "bcrypt hash ($2y$, $2b$ or $2a$)",
                        user ? user : "");
                return SG_ERR_INVALID;
        }
        sg_kv_t *u = realloc(a->users, (a->user_cnt + 1) * sizeof(*u));
        if (!u) {
                sg_errf(errstr, errstr_size, "out of memory");
                return SG_ERR_NOMEM;
        }
        a->users = u;
        u = &a->users[a->user_cnt];
        u->name = strdup(user);
        u->value = strdup(hash);
        u->from_env = false;
        if (!u->name || !u->value) {
                free(u->name);
                free(u->value);
                sg_errf(errstr, errstr_size, "out of memory");
                return SG_ERR_NOMEM;
        }
        a->user_cnt++;
        if (!a->dummy) {
                /* an unknown user is checked against a hash of the same
                 * cost, so that it takes as long as a known one */
                unsigned char rnd[16];
                char pw[33], salt[CRYPT_GENSALT_OUTPUT_SIZE], prefix[5];
                snprintf(prefix, sizeof(prefix), "%.4s", hash);
                unsigned long cost = strtoul(hash + 4, NULL, 10);
                if (RAND_bytes(rnd, sizeof(rnd)) != 1)
                        memset(rnd, 0x5a, sizeof(rnd));
                for (size_t i = 0; i < sizeof(rnd); i++)
                        snprintf(pw + 2 * i, 3, "%02x", rnd[i]);
                const char *h = NULL;
                if (crypt_gensalt_rn(prefix, cost, NULL, 0, salt, sizeof(salt)))
                        h = crypt_rn(pw, salt, &a->cd, sizeof(a->cd));
                a->dummy = strdup(h && h[0] == '$' ? h : hash);
                if (!a->dummy) {
                        sg_errf(errstr, errstr_size, "out of memory");
                        return SG_ERR_NOMEM;
                }
        }
        return SG_OK;
}

sg_err_t sg_http_auth_token_add(sg_http_auth_t *a, const char *name,
                                const char *digest, char *errstr,
                                size_t errstr_size) {
        if (!sg_http_token_hash_ok(digest)) {
                sg_errf(errstr, errstr_size,
                        "bearer token \"%s\": \"sha256:\" and 64 hex digits",
                        name ? name : "");
                return SG_ERR_INVALID;
        }
        unsigned char(*t)[SHA256_DIGEST_LENGTH] =
                realloc(a->tokens, (a->token_cnt + 1) * sizeof(*t));
        if (!t) {
                sg_errf(errstr, errstr_size, "out of memory");
                return SG_ERR_NOMEM;
        }
        a->tokens = t;
        for (size_t i = 0; i < SHA256_DIGEST_LENGTH; i++)
                a->tokens[a->token_cnt][i] =
                        (unsigned char)(hexval(digest[7 + 2 * i]) * 16 +
                                        hexval(digest[8 + 2 * i]));
        a->token_cnt++;
        return SG_OK;
}

/* ---- checking ----------------------------------------------------------- */

/* One uncached bcrypt check may run now (the token bucket refills at
 * SG_HTTP_BCRYPT_PER_S per second, up to that many). */
static bool bucket_take(sg_http_auth_t *a) {
        int64_t now = sg_clock_mono_ms();
        a->bucket +=
                (double)(now - a->refill_ms) * SG_HTTP_BCRYPT_PER_S / 1000.0;
        if (a->bucket > SG_HTTP_BCRYPT_PER_S)
                a->bucket = SG_HTTP_BCRYPT_PER_S;
        a->refill_ms = now;
        if (a->bucket < 1.0)
                return false;
        a->bucket -= 1.0;
        return true;
}

static sg_http_auth_result_t check_basic(sg_http_auth_t *a, const char *b64) {
        size_t n = strlen(b64);
        if (n == 0 || n % 4 || n > 4096)
                return SG_HTTP_AUTH_DENIED;
        unsigned char *dec = malloc(n / 4 * 3 + 1);
        if (!dec)
                return SG_HTTP_AUTH_DENIED;
        int len = EVP_DecodeBlock(dec, (const unsigned char *)b64, (int)n);
        if (len < 0) {
                free(dec);
                return SG_HTTP_AUTH_DENIED;
        }
        /* EVP_DecodeBlock counts the padding's bytes too */
        for (size_t i = n; i > 0 && b64[i - 1] == '='; i--)
                len--;
        dec[len] = '\0';
        char *colon = memchr(dec, ':', (size_t)len);
        if (!colon || memchr(dec, '\0', (size_t)len)) {
                OPENSSL_cleanse(dec, (size_t)len);
                free(dec);
                return SG_HTTP_AUTH_DENIED;
        }
        *colon = '\0';
        const char *user = (const char *)dec, *pass = colon + 1;
        const char *hash = NULL;
        for (size_t i = 0; i < a->user_cnt && !hash; i++)
                if (!strcmp(a->users[i].name, user))
                        hash = a->users[i].value;
        bool known = hash != NULL;
        if (!known)
                hash = a->dummy;

        /* the cache, by SHA-256(user NUL hash NUL password) */
        unsigned char key[SHA256_DIGEST_LENGTH];
        EVP_MD_CTX *md = EVP_MD_CTX_new();
        bool keyed = md && EVP_DigestInit_ex(md, EVP_sha256(), NULL) == 1 &&
                     EVP_DigestUpdate(md, user, strlen(user) + 1) == 1 &&
                     EVP_DigestUpdate(md, hash, strlen(hash) + 1) == 1 &&
                     EVP_DigestUpdate(md, pass, strlen(pass)) == 1 &&
                     EVP_DigestFinal_ex(md, key, NULL) == 1;
        EVP_MD_CTX_free(md);
        sg_http_auth_result_t res = SG_HTTP_AUTH_DENIED;
        cached_t *slot = &a->cache[0];
        bool hit = false;
        for (size_t i = 0; keyed && i < CACHE_SIZE; i++) {
                cached_t *c = &a->cache[i];
                if (c->used && !CRYPTO_memcmp(c->key, key, sizeof(key))) {
                        c->used = ++a->uses;
                        res = c->ok ? SG_HTTP_AUTH_OK : SG_HTTP_AUTH_DENIED;
                        hit = true;
                        break;
                }
                if (c->used < slot->used)
                        slot = c;
        }
        if (!hit) {
                if (!bucket_take(a)) {
                        res = SG_HTTP_AUTH_THROTTLED;
                } else {
                        const char *h =
                                crypt_rn(pass, hash, &a->cd, sizeof(a->cd));
                        bool ok = known && h && strlen(h) == strlen(hash) &&
                                  !CRYPTO_memcmp(h, hash, strlen(hash));
                        res = ok ? SG_HTTP_AUTH_OK : SG_HTTP_AUTH_DENIED;
                        if (keyed) {
                                memcpy(slot->key, key, sizeof(key));
                                slot->ok = ok;
                                slot->used = ++a->uses;
                        }
                        OPENSSL_cleanse(&a->cd, sizeof(a->cd));
                }
        }
        OPENSSL_cleanse(dec, (size_t)len);
        free(dec);
        return res;
}

static sg_http_auth_result_t check_bearer(const sg_http_auth_t *a,
                                          const char *token) {
        unsigned char d[SHA256_DIGEST_LENGTH];
        if (!*token || !SHA256((const unsigned char *)token, strlen(token), d))
                return SG_HTTP_AUTH_DENIED;
        bool ok = false;
        for (size_t i = 0; i < a->token_cnt; i++)
                ok |= !CRYPTO_memcmp(a->tokens[i], d, sizeof(d));
        return ok ? SG_HTTP_AUTH_OK : SG_HTTP_AUTH_DENIED;
}

sg_http_auth_result_t sg_http_auth_check(sg_http_auth_t *a,
                                         const char *authorization) {
        if (!authorization)
                return SG_HTTP_AUTH_DENIED;
        /* the scheme is case-insensitive (RFC 9110 §11.1) */
        if (a->user_cnt && !strncasecmp(authorization, "Basic ", 6))
                return check_basic(a, authorization + 6);
        if (a->token_cnt && !strncasecmp(authorization, "Bearer ", 7))
                return check_bearer(a, authorization + 7);
        return SG_HTTP_AUTH_DENIED;
}
