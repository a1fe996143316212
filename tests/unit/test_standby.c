/*
 * test_standby.c — standby replica placement (standby.h, semantics §6
 * "Standby replicas"): members ordered by member id, the next N after the
 * owner, never the owner, the same answer whatever order the group
 * description lists its members in.
 */
#include "standby.h"
#include "testutil.h"

#include <check.h>

#include <stdlib.h>
#include <string.h>

static const sg_standby_tp_t pa[] = {{"in", 0}, {"in", 3}};
static const sg_standby_tp_t pb[] = {{"in", 1}, {"other", 0}};
static const sg_standby_tp_t pc[] = {{"in", 2}};

/* listed out of member id order on purpose: "a" < "b" < "c" */
static const sg_standby_member_t three[] = {
        {"c-member", pc, 1},
        {"a-member", pa, 2},
        {"b-member", pb, 2},
};

static size_t place(const sg_standby_member_t *m, size_t n, int replicas,
                    const char *me, sg_standby_tp_t **out) {
        size_t cnt = 99;
        char es[128];
        ck_assert_int_eq(
                sg_standby_place(m, n, replicas, me, out, &cnt, es, sizeof(es)),
                SG_OK);
        return cnt;
}

static void has(const sg_standby_tp_t *o, size_t i, const char *topic,
                int32_t partition) {
        ck_assert_str_eq(o[i].topic, topic);
        ck_assert_int_eq(o[i].partition, partition);
}

/* one replica: each member is standby for its predecessor's partitions */
START_TEST(one_replica_next_member) {
        sg_standby_tp_t *o;
        size_t n = place(three, 3, 1, "b-member", &o);
        ck_assert_uint_eq(n, 2); /* a's */
        has(o, 0, "in", 0);
        has(o, 1, "in", 3);
        free(o);
        n = place(three, 3, 1, "c-member", &o);
        ck_assert_uint_eq(n, 2); /* b's, sorted by topic then partition */
        has(o, 0, "in", 1);
        has(o, 1, "other", 0);
        free(o);
        n = place(three, 3, 1, "a-member", &o); /* wraps: c's */
        ck_assert_uint_eq(n, 1);
        has(o, 0, "in", 2);
        free(o);
}
END_TEST

/* two replicas of three members: every other member's partitions */
START_TEST(two_replicas_all_others) {
        sg_standby_tp_t *o;
        size_t n = place(three, 3, 2, "a-member", &o);
        ck_assert_uint_eq(n, 3);
        has(o, 0, "in", 1);
        has(o, 1, "in", 2);
        has(o, 2, "other", 0);
        free(o);
}
END_TEST

/* more replicas than other members: capped, never the owner itself */
START_TEST(replicas_capped_never_owner) {
        sg_standby_tp_t *o;
        size_t n = place(three, 3, 16, "c-member", &o);
        ck_assert_uint_eq(n, 4);
        for (size_t i = 0; i < n; i++)
                ck_assert(!(o[i].partition == 2 && !strcmp(o[i].topic, "in")));
        free(o);
}
END_TEST

/* every order of the description gives every member the same answer */
START_TEST(order_independent) {
        static const int perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                                        {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
        const char *ids[] = {"a-member", "b-member", "c-member"};
        sg_standby_tp_t *ref[3];
        size_t refn[3];
        for (int k = 0; k < 3; k++)
                refn[k] = place(three, 3, 1, ids[k], &ref[k]);
        for (int p = 0; p < 6; p++) {
                sg_standby_member_t m[3];
                for (int i = 0; i < 3; i++)
                        m[i] = three[perms[p][i]];
                for (int k = 0; k < 3; k++) {
                        sg_standby_tp_t *o;
                        size_t n = place(m, 3, 1, ids[k], &o);
                        ck_assert_uint_eq(n, refn[k]);
                        for (size_t i = 0; i < n; i++)
                                has(o, i, ref[k][i].topic, ref[k][i].partition);
                        free(o);
                }
        }
        for (int k = 0; k < 3; k++)
                free(ref[k]);
}
END_TEST

/* none: no replicas, a group of one, a member not in the group, a
 * partition named under two members (a rebalance) that this one owns */
START_TEST(none_cases) {
        sg_standby_tp_t *o;
        ck_assert_uint_eq(place(three, 3, 0, "a-member", &o), 0);
        ck_assert_ptr_null(o);
        ck_assert_uint_eq(place(three, 1, 1, "c-member", &o), 0);
        ck_assert_ptr_null(o);
        ck_assert_uint_eq(place(three, 3, 1, "z-member", &o), 0);
        ck_assert_ptr_null(o);
        static const sg_standby_tp_t both[] = {{"in", 5}};
        static const sg_standby_tp_t mine[] = {{"in", 5}, {"in", 6}};
        const sg_standby_member_t two[] = {{"x", both, 1}, {"y", mine, 2}};
        ck_assert_uint_eq(place(two, 2, 1, "y", &o), 0);
        ck_assert_ptr_null(o);
        size_t n = place(two, 2, 1, "x", &o);
        ck_assert_uint_eq(n, 1);
        has(o, 0, "in", 6);
        free(o);
}
END_TEST

/* two members, each standby for the other: the test_standby.py setup */
START_TEST(two_members_swap) {
        static const sg_standby_tp_t p1[] = {{"in", 0}, {"in", 1}};
        static const sg_standby_tp_t p2[] = {{"in", 2}, {"in", 3}};
        const sg_standby_member_t two[] = {{"m2", p2, 2}, {"m1", p1, 2}};
        sg_standby_tp_t *o;
        ck_assert_uint_eq(place(two, 2, 1, "m1", &o), 2);
        has(o, 0, "in", 2);
        has(o, 1, "in", 3);
        free(o);
        ck_assert_uint_eq(place(two, 2, 1, "m2", &o), 2);
        has(o, 0, "in", 0);
        has(o, 1, "in", 1);
        free(o);
}
END_TEST

/* A ConsumerProtocol Assignment as the broker hands it back: version 1
 * (cooperative-sticky), topics "in" [2, 0] and "ab" [5], user data. */
static const unsigned char ASSIGNMENT[] = {
        0, 1,         /* version */
        0, 0, 0,   2, /* two topics */
        0, 2, 'i', 'n', 0,   0,   0,  2, 0, 0, 0, 2, 0, 0, 0, 0, /* in: 2, 0 */
        0, 2, 'a', 'b', 0,   0,   0,  1, 0, 0, 0, 5,             /* ab: 5 */
        0, 0, 0,   3,   'x', 'y', 'z' /* user data, not read */
};

START_TEST(assignment_parsed) {
        sg_standby_tp_t *tps = NULL;
        size_t n = 0;
        char es[256] = "";
        ck_assert_int_eq(sg_standby_assignment_parse(ASSIGNMENT,
                                                     sizeof(ASSIGNMENT), &tps,
                                                     &n, es, sizeof(es)),
                         SG_OK);
        ck_assert_uint_eq(n, 3);
        has(tps, 0, "in", 2);
        has(tps, 1, "in", 0);
        has(tps, 2, "ab", 5);
        /* appends; an empty assignment (a member not assigned yet) adds
         * nothing */
        ck_assert_int_eq(
                sg_standby_assignment_parse("", 0, &tps, &n, es, sizeof(es)),
                SG_OK);
        ck_assert_uint_eq(n, 3);
        sg_standby_tps_free(tps, n);
}
END_TEST

/* every cut of the bytes short of the user data is refused, none read past
 * the end (the sanitizer build checks) */
START_TEST(assignment_cut_short_refused) {
        size_t whole = sizeof(ASSIGNMENT) - 7; /* without the user data */
        for (size_t len = 1; len < whole; len++) {
                sg_standby_tp_t *tps = NULL;
                size_t n = 0;
                char es[256] = "";
                unsigned char *b = malloc(len);
                ck_assert_ptr_nonnull(b);
                memcpy(b, ASSIGNMENT, len);
                ck_assert_msg(sg_standby_assignment_parse(b, len, &tps, &n, es,
                                                          sizeof(es)) ==
                                      SG_ERR_INVALID,
                              "%zu bytes accepted", len);
                ck_assert_ptr_nonnull(strstr(es, "assignment"));
                sg_standby_tps_free(tps, n);
                free(b);
        }
        /* a negative count */
        static const unsigned char neg[] = {0, 0, 0xff, 0xff, 0xff, 0xff};
        sg_standby_tp_t *tps = NULL;
        size_t n = 0;
        char es[256];
        ck_assert_int_eq(sg_standby_assignment_parse(neg, sizeof(neg), &tps, &n,
                                                     es, sizeof(es)),
                         SG_ERR_INVALID);
        sg_standby_tps_free(tps, n);
}
END_TEST

int main(void) {
        Suite *s = suite_create("standby");
        TCase *tc = tcase_create("place");
        tcase_add_test(tc, one_replica_next_member);
        tcase_add_test(tc, two_replicas_all_others);
        tcase_add_test(tc, replicas_capped_never_owner);
        tcase_add_test(tc, order_independent);
        tcase_add_test(tc, none_cases);
        tcase_add_test(tc, two_members_swap);
        tcase_add_test(tc, assignment_parsed);
        tcase_add_test(tc, assignment_cut_short_refused);
        suite_add_tcase(s, tc);
        return tu_run_suite(s);
}
