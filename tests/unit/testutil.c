/*
 * testutil.c — the unit suites' shared helpers (testutil.h).
 */
#include "testutil.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Fails the test at the caller's file:line unless cond holds. */
#define TU_CHECK_AT(file, line, cond, ...)                                     \
        ((cond) ? _mark_point(file, line)                                      \
                : _ck_assert_failed(file, line,                                \
                                    "Assertion '" #cond "' failed",            \
                                    __VA_ARGS__))

int tu_run_suite(Suite *s) {
        SRunner *sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

void tu_tmpdir_at(const char *file, int line, char *buf, size_t size,
                  const char *name) {
        int n = snprintf(buf, size, "/tmp/sg_test_%s_XXXXXX", name);
        TU_CHECK_AT(file, line, n > 0 && (size_t)n < size,
                    "temp dir name for '%s' does not fit %zu bytes", name,
                    size);
        TU_CHECK_AT(file, line, mkdtemp(buf) != NULL, "mkdtemp %s: %s", buf,
                    strerror(errno));
}

void tu_rmrf_at(const char *file, int line, const char *dir) {
        char cmd[512];
        int n = snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        TU_CHECK_AT(file, line, n > 0 && (size_t)n < sizeof(cmd),
                    "path too long: %s", dir);
        int rc = system(cmd);
        TU_CHECK_AT(file, line, rc == 0, "%s: exit %d", cmd, rc);
}

void tu_sleep_ms(long ms) {
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
                ;
}

void tu_clrec_set_at(const char *file, int line, tu_clrec_t *c,
                     const sg_effect_t *ef) {
        TU_CHECK_AT(file, line, ef->key_len <= sizeof(c->key),
                    "changelog key of %zu bytes (at most %zu)", ef->key_len,
                    sizeof(c->key));
        TU_CHECK_AT(file, line, ef->value_len <= sizeof(c->value),
                    "changelog value of %zu bytes (at most %zu)", ef->value_len,
                    sizeof(c->value));
        memcpy(c->key, ef->key, ef->key_len);
        c->key_len = ef->key_len;
        c->tombstone = ef->value == NULL;
        if (ef->value)
                memcpy(c->value, ef->value, ef->value_len);
        c->value_len = ef->value_len;
}
