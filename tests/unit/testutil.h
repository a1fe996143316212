/*
 * testutil.h — what the unit suites share: assertions that report the
 * caller's file:line and both values (libuv's test/task.h idea, on top of
 * Check), and the helpers the suites used to copy: running a suite,
 * temporary directories, sleeping, and keeping a changelog effect.
 *
 * A helper that asserts is a macro over a *_at(file, line, ...) function,
 * so a failure inside it names the test's line, not the helper's. All of
 * it runs in the test's own process (Check forks one per test) and is not
 * thread-safe unless said.
 */
#ifndef SG_TESTUTIL_H
#define SG_TESTUTIL_H

#include "processor.h"
#include "seqgate.h"

#include <check.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Fails unless a == b (as intmax_t), printing both expressions and values. */
#define ASSERT_EQ_INT(a, b)                                                    \
        do {                                                                   \
                intmax_t tu_a_ = (a), tu_b_ = (b);                             \
                ck_assert_msg(tu_a_ == tu_b_, "%s == %jd, %s == %jd", #a,      \
                              tu_a_, #b, tu_b_);                               \
        } while (0)

/* Fails unless a == b (as uint64_t), printing both expressions and values. */
#define ASSERT_EQ_U64(a, b)                                                    \
        do {                                                                   \
                uint64_t tu_a_ = (a), tu_b_ = (b);                             \
                ck_assert_msg(tu_a_ == tu_b_,                                  \
                              "%s == %" PRIu64 ", %s == %" PRIu64, #a, tu_a_,  \
                              #b, tu_b_);                                      \
        } while (0)

/* Fails unless the strings a and b are equal (NULL equals only NULL),
 * printing both. */
#define ASSERT_STR_EQ(a, b)                                                    \
        do {                                                                   \
                const char *tu_a_ = (a), *tu_b_ = (b);                         \
                ck_assert_msg((!tu_a_ && !tu_b_) || (tu_a_ && tu_b_ &&         \
                                                     !strcmp(tu_a_, tu_b_)),   \
                              "%s == \"%s\", %s == \"%s\"", #a,                \
                              tu_a_ ? tu_a_ : "(null)", #b,                    \
                              tu_b_ ? tu_b_ : "(null)");                       \
        } while (0)

/* Fails unless the sg_err_t expression err is SG_OK, printing its name and
 * the errstr buffer the call filled. */
#define ASSERT_OK(err, errstr)                                                 \
        do {                                                                   \
                sg_err_t tu_e_ = (err);                                        \
                ck_assert_msg(tu_e_ == SG_OK, "%s: %s: %s", #err,              \
                              sg_err2str(tu_e_), (errstr));                    \
        } while (0)

/* Runs the suite (CK_NORMAL output) and frees it. Returns the process exit
 * status: EXIT_SUCCESS when every test passed, else EXIT_FAILURE. */
int tu_run_suite(Suite *s);

/* Creates a fresh directory /tmp/sg_test_<name>_XXXXXX (mkdtemp) and
 * writes its path into buf (size bytes); fails the test if it cannot. */
#define tu_tmpdir(buf, size, name)                                             \
        tu_tmpdir_at(__FILE__, __LINE__, buf, size, name)
void tu_tmpdir_at(const char *file, int line, char *buf, size_t size,
                  const char *name);

/* Removes the directory dir and everything below it (rm -rf); fails the
 * test if it cannot. */
#define tu_rmrf(dir) tu_rmrf_at(__FILE__, __LINE__, dir)
void tu_rmrf_at(const char *file, int line, const char *dir);

/* Sleeps ms milliseconds (again after a signal). */
void tu_sleep_ms(long ms);

/* A changelog record as the exactly_once loop would produce it (the value
 * NULL: a tombstone). */
typedef struct tu_clrec {
        unsigned char key[64];
        size_t key_len;
        unsigned char value[2048];
        size_t value_len;
        bool tombstone;
        int32_t partition;
} tu_clrec_t;

/* Copies the changelog effect ef's key and value into c (the partition is
 * left to the caller); fails the test if either does not fit. */
#define tu_clrec_set(c, ef) tu_clrec_set_at(__FILE__, __LINE__, c, ef)
void tu_clrec_set_at(const char *file, int line, tu_clrec_t *c,
                     const sg_effect_t *ef);

#endif
