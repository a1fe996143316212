/*
 * timeparse.c — RFC 3339 timestamps (timeparse.h).
 */
#include "timeparse.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

bool parse_rfc3339(const char *s, int64_t *out) {
        struct tm tm;
        memset(&tm, 0, sizeof(tm));
        int used = 0;
        if (sscanf(s, "%4d-%2d-%2d%*[Tt ]%2d:%2d:%2d%n", &tm.tm_year,
                   &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec,
                   &used) != 6 ||
            used < 19)
                return false;
        const char *p = s + used;
        int64_t ms = 0;
        if (*p == '.') {
                int digits = 0;
                for (p++; *p >= '0' && *p <= '9'; p++, digits++)
                        if (digits < 3)
                                ms = ms * 10 + (*p - '0');
                if (!digits)
                        return false;
                for (; digits < 3; digits++)
                        ms *= 10;
        }
        int64_t off = 0;
        if (*p == 'Z' || *p == 'z') {
                p++;
        } else if (*p == '+' || *p == '-') {
                int hh, mm, k = 0;
                if (sscanf(p + 1, "%2d:%2d%n", &hh, &mm, &k) != 2 || k != 5)
                        return false;
                off = (hh * 60 + mm) * 60000LL * (*p == '+' ? 1 : -1);
                p += 6;
        } else {
                return false;
        }
        if (*p || tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 ||
            tm.tm_mday > 31 || tm.tm_hour > 23 || tm.tm_min > 59 ||
            tm.tm_sec > 60)
                return false;
        tm.tm_year -= 1900;
        tm.tm_mon -= 1;
        time_t t = timegm(&tm);
        *out = (int64_t)t * 1000 + ms - off;
        return true;
}
