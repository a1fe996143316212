/*
 * timeparse.h — RFC 3339 timestamps in seqgatectl's options and inputs
 * (simulate's "timestamp" and "clock", dlq's --from / --to).
 */
#ifndef SEQGATECTL_TIMEPARSE_H
#define SEQGATECTL_TIMEPARSE_H

#include <stdbool.h>
#include <stdint.h>

/* Parses RFC 3339 text ("2026-01-01T00:00:00Z", "2026-01-01T08:00:00.250
 * +01:00" with 'T' or a space; fractions past milliseconds are cut) into
 * milliseconds since the epoch. false on anything else, *ms then
 * unchanged. Pure; thread-safe. */
bool parse_rfc3339(const char *s, int64_t *ms);

#endif
