/*
 * test_takeover.c — which open transaction a new owner may fence
 * (takeover.h, semantics §6 "Taking over from a dead owner"): only a
 * named writer that is not this instance and not a member of the group as
 * described now; whatever is unknown means waiting.
 */
#include "takeover.h"
#include "testutil.h"

#include <check.h>

#include <string.h>

static const char *const members[] = {"sg-a-1111", "sg-b-2222"};

static sg_takeover_verdict_t judge(const char *txid, const char *member,
                                   bool known) {
        return sg_takeover_judge(txid, txid ? strlen(txid) : 0, member,
                                 member ? strlen(member) : 0, "grp-a",
                                 known ? members : NULL, known ? 2 : 0, known);
}

START_TEST(departed_writer_fenced) {
        ck_assert_int_eq(judge("grp-c", "sg-c-3333", true), SG_TAKEOVER_FENCE);
        /* a member id that is a prefix or an extension of a live one is
         * another member */
        ck_assert_int_eq(judge("grp-c", "sg-b-222", true), SG_TAKEOVER_FENCE);
        ck_assert_int_eq(judge("grp-c", "sg-b-22220", true), SG_TAKEOVER_FENCE);
        /* the group may be empty but for us: not described as anyone */
        ck_assert_int_eq(sg_takeover_judge("grp-c", 5, "sg-c-3333", 9, "grp-a",
                                           NULL, 0, true),
                         SG_TAKEOVER_FENCE);
}
END_TEST

START_TEST(live_member_never_fenced) {
        ck_assert_int_eq(judge("grp-b", "sg-b-2222", true),
                         SG_TAKEOVER_LIVE_MEMBER);
        /* the same instance, restarted: a new member id — its old one gone */
        ck_assert_int_eq(judge("grp-b", "sg-b-0000", true), SG_TAKEOVER_FENCE);
}
END_TEST

START_TEST(unknowns_wait) {
        ck_assert_int_eq(judge(NULL, NULL, true), SG_TAKEOVER_UNKNOWN_WRITER);
        ck_assert_int_eq(judge("grp-c", NULL, true),
                         SG_TAKEOVER_UNKNOWN_WRITER);
        ck_assert_int_eq(judge(NULL, "sg-c-3333", true),
                         SG_TAKEOVER_UNKNOWN_WRITER);
        ck_assert_int_eq(judge("", "sg-c-3333", true),
                         SG_TAKEOVER_UNKNOWN_WRITER);
        ck_assert_int_eq(judge("grp-c", "sg-c-3333", false),
                         SG_TAKEOVER_MEMBERS_UNKNOWN);
        /* our own id: never fenced from here */
        ck_assert_int_eq(judge("grp-a", "sg-x-9999", true), SG_TAKEOVER_OWN);
        ck_assert_int_eq(judge("grp-a", "sg-x-9999", false), SG_TAKEOVER_OWN);
        /* header values are lengths, not C strings */
        ck_assert_int_eq(sg_takeover_judge("grp-a-and-more", 5, "sg-x", 4,
                                           "grp-a", members, 2, true),
                         SG_TAKEOVER_OWN);
        ck_assert_int_eq(sg_takeover_judge("grp-c", 5, "sg-a-1111-tail", 9,
                                           "grp-a", members, 2, true),
                         SG_TAKEOVER_LIVE_MEMBER);
}
END_TEST

START_TEST(names) {
        ck_assert_str_eq(sg_takeover_verdict_name(SG_TAKEOVER_FENCE), "fence");
        ck_assert_str_eq(sg_takeover_verdict_name(SG_TAKEOVER_LIVE_MEMBER),
                         "live_member");
        ck_assert_str_eq(sg_takeover_verdict_name(SG_TAKEOVER_MEMBERS_UNKNOWN),
                         "members_unknown");
}
END_TEST

int main(void) {
        Suite *s = suite_create("takeover");
        TCase *tc = tcase_create("judge");
        tcase_add_test(tc, departed_writer_fenced);
        tcase_add_test(tc, live_member_never_fenced);
        tcase_add_test(tc, unknowns_wait);
        tcase_add_test(tc, names);
        suite_add_tcase(s, tc);
        return tu_run_suite(s);
}
