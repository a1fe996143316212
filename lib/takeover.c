/*
 * takeover.c — whether a new owner may fence the writer of an open
 * transaction (takeover.h; semantics §6 "Taking over from a dead owner").
 */
#include "takeover.h"

#include <string.h>

static bool same(const char *a, size_t a_len, const char *b) {
        return strlen(b) == a_len && !memcmp(a, b, a_len);
}

sg_takeover_verdict_t sg_takeover_judge(const char *writer_txid,
                                        size_t txid_len,
                                        const char *writer_member,
                                        size_t member_len, const char *own_txid,
                                        const char *const *members,
                                        size_t member_cnt, bool members_known) {
        if (!writer_txid || !txid_len || !writer_member || !member_len)
                return SG_TAKEOVER_UNKNOWN_WRITER;
        if (own_txid && same(writer_txid, txid_len, own_txid))
                return SG_TAKEOVER_OWN;
        if (!members_known)
                return SG_TAKEOVER_MEMBERS_UNKNOWN;
        for (size_t i = 0; i < member_cnt; i++)
                if (members[i] && same(writer_member, member_len, members[i]))
                        return SG_TAKEOVER_LIVE_MEMBER;
        return SG_TAKEOVER_FENCE;
}

const char *sg_takeover_verdict_name(sg_takeover_verdict_t v) {
        switch (v) {
        case SG_TAKEOVER_FENCE:
                return "fence";
        case SG_TAKEOVER_UNKNOWN_WRITER:
                return "unknown_writer";
        case SG_TAKEOVER_OWN:
                return "own";
        case SG_TAKEOVER_LIVE_MEMBER:
                return "live_member";
        case SG_TAKEOVER_MEMBERS_UNKNOWN:
                return "members_unknown";
        }
        return "unknown";
}
