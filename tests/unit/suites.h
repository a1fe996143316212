/*
 * suites.h — the Check suites other code may run (a combined runner, a
 * fuzz harness): each builds its suite afresh; the caller owns it (an
 * SRunner frees it).
 */
#ifndef SG_TEST_SUITES_H
#define SG_TEST_SUITES_H

#include <check.h>

/* test_engine.c: every row of the decision table (semantics §3). */
Suite *engine_suite(void);
/* test_engine_prop.c: the engine's invariants as a property test. */
Suite *engine_prop_suite(void);

#endif
