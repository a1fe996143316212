/*
 * envelope_text.c — the byte-level primitives the envelope (and the engine)
 * judge with: SHA-256 (OpenSSL EVP), UTF-8 validity (RFC 3629) and version
 * text (semantics §2: decimal, up to 2^64 - 1). Contracts in envelope.h and
 * envelope_int.h.
 */
/* OpenSSL 3 deprecates SHA256_Init/Update/Final; see sg_sha256_ctx for
 * why they are used when present. Must precede the first OpenSSL header. */
#define OPENSSL_SUPPRESS_DEPRECATED

#include "envelope.h"
#include "envelope_int.h"

#include <openssl/opensslv.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <string.h>

/* The digest functions without the EVP layer, where the library still
 * has them (OpenSSL 3.x builds without OPENSSL_NO_DEPRECATED_3_0). */
#if !defined(OPENSSL_NO_DEPRECATED_3_0) && OPENSSL_VERSION_MAJOR < 4
#define SG_SHA256_DIRECT 1
#else
#define SG_SHA256_DIRECT 0
#endif

/*
 * SHA-256 through OpenSSL EVP. The algorithm is fetched once per process
 * (an implicit fetch on every call takes a lock and a lookup: measurable on
 * the per-record path); pthread_once makes that thread-safe.
 */
static EVP_MD *sha256_fetched;
static pthread_once_t sha256_once = PTHREAD_ONCE_INIT;

static void sha256_fetch(void) {
#if OPENSSL_VERSION_NUMBER >= 0x30000000L
        sha256_fetched = EVP_MD_fetch(NULL, "SHA256", NULL);
#endif
}

const EVP_MD *sg_sha256_md(void) {
        pthread_once(&sha256_once, sha256_fetch);
        return sha256_fetched ? sha256_fetched : EVP_sha256();
}

/*
 * Three digests a record (the idempotency key, the payload, the aggregate
 * id: semantics §2). Through EVP, OpenSSL 3.0's EVP_DigestInit_ex frees
 * and allocates the provider's digest context on every call and
 * dispatches through the provider: ≈ 35 ns and an allocation per digest
 * more than the same SHA-256 through SHA256_Init/Update/Final, which hold
 * their state on the stack. Those are deprecated in OpenSSL 3 but present
 * in every 3.x (Debian bookworm's 3.0); the EVP path stays for a library
 * without them. Same digest either way (FIPS 180-4).
 */
bool sg_sha256_ctx(EVP_MD_CTX *ctx, const void *data, size_t len,
                   unsigned char *out) {
        static const unsigned char empty = 0;
        unsigned int olen = 0;

        if (!data)
                data = &empty; /* EVP wants a pointer even for 0 bytes */
#if SG_SHA256_DIRECT
        (void)ctx;
        (void)olen;
        SHA256_CTX sc;
        return SHA256_Init(&sc) == 1 && SHA256_Update(&sc, data, len) == 1 &&
               SHA256_Final(out, &sc) == 1;
#else
        if (!ctx)
                return EVP_Digest(data, len, out, &olen, sg_sha256_md(),
                                  NULL) == 1 &&
                       olen == SG_HASH_LEN;
        return EVP_DigestInit_ex(ctx, sg_sha256_md(), NULL) == 1 &&
               EVP_DigestUpdate(ctx, data, len) == 1 &&
               EVP_DigestFinal_ex(ctx, out, &olen) == 1 && olen == SG_HASH_LEN;
#endif
}

void sg_sha256(const void *data, size_t len, unsigned char *out) {
        if (!sg_sha256_ctx(NULL, data, len, out))
                memset(out, 0, SG_HASH_LEN);
}

bool sg_utf8_valid(const char *s, size_t len) {
        const unsigned char *p = (const unsigned char *)s;
        size_t i = 0;

        if (!s)
                return len == 0;
        /* RFC 3629 §4 (UTF8-octets ABNF). */
        while (i < len) {
                unsigned char c = p[i];
                unsigned char lo = 0x80, hi = 0xbf;
                size_t n;

                if (c < 0x80) {
                        i++;
                        continue;
                } else if (c >= 0xc2 && c <= 0xdf) {
                        n = 1;
                } else if (c >= 0xe0 && c <= 0xef) {
                        n = 2;
                        if (c == 0xe0)
                                lo = 0xa0; /* overlong */
                        else if (c == 0xed)
                                hi = 0x9f; /* surrogates U+D800..U+DFFF */
                } else if (c >= 0xf0 && c <= 0xf4) {
                        n = 3;
                        if (c == 0xf0)
                                lo = 0x90; /* overlong */
                        else if (c == 0xf4)
                                hi = 0x8f; /* above U+10FFFF */
                } else {
                        return false; /* C0, C1 (overlong), F5..FF, stray continuation */
                }
                if (len - i - 1 < n)
                        return false; /* truncated */
                if (p[i + 1] < lo || p[i + 1] > hi)
                        return false;
                for (size_t k = 2; k <= n; k++)
                        if (p[i + k] < 0x80 || p[i + k] > 0xbf)
                                return false;
                i += n + 1;
        }
        return true;
}

sg_err_t sg_version_parse(const char *s, size_t len, uint64_t *out) {
        uint64_t v = 0;

        if (!s || len == 0)
                return SG_ERR_INVALID;
        for (size_t i = 0; i < len; i++) {
                unsigned d;
                if (s[i] < '0' || s[i] > '9')
                        return SG_ERR_INVALID;
                d = (unsigned)(s[i] - '0');
                if (v > (UINT64_MAX - d) / 10)
                        return SG_ERR_INVALID; /* overflow */
                v = v * 10 + d;
        }
        if (out)
                *out = v;
        return SG_OK;
}
