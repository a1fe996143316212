/*
 * http_int.h — what http.c and http_auth.c share: the credentials of the
 * HTTP endpoint (http_auth.c). Not a public header.
 */
#ifndef SEQGATE_HTTP_INT_H
#define SEQGATE_HTTP_INT_H

#include "config.h"
#include "http.h"

#include <stdbool.h>

/** Uncached bcrypt checks per second, at most (and at most this many at
 *  once): beyond, a request with a password is 429. */
#define SG_HTTP_BCRYPT_PER_S 4

typedef struct sg_http_auth sg_http_auth_t;

typedef enum sg_http_auth_result {
        SG_HTTP_AUTH_OK,        /**< a configured user or token */
        SG_HTTP_AUTH_DENIED,    /**< none, or not one of them: 401 */
        SG_HTTP_AUTH_THROTTLED, /**< too many password checks now: 429 */
} sg_http_auth_result_t;

/** A set of credentials with none in it; NULL when out of memory. */
sg_http_auth_t *sg_http_auth_new(void);
void sg_http_auth_free(sg_http_auth_t *a);
/** Whether a user or a token was added (then credentials are required). */
bool sg_http_auth_on(const sg_http_auth_t *a);
/** Adds user @p user with bcrypt hash @p hash (sg_http_bcrypt_hash_ok).
 *  @returns SG_OK, SG_ERR_INVALID, SG_ERR_NOMEM. */
sg_err_t sg_http_auth_user_add(sg_http_auth_t *a, const char *user,
                               const char *hash, char *errstr,
                               size_t errstr_size);
/** Adds a bearer token by its digest "sha256:<64 hex>" (@p name: the
 *  operator's, not used to check). @returns SG_OK, SG_ERR_INVALID,
 *  SG_ERR_NOMEM. */
sg_err_t sg_http_auth_token_add(sg_http_auth_t *a, const char *name,
                                const char *digest, char *errstr,
                                size_t errstr_size);
/** Checks the value of a request's Authorization header (NULL: none):
 *  "Basic <base64(user:password)>" (RFC 7617) against the users, "Bearer
 *  <token>" (RFC 6750) against the tokens. */
sg_http_auth_result_t sg_http_auth_check(sg_http_auth_t *a,
                                         const char *authorization);

#endif /* SEQGATE_HTTP_INT_H */
