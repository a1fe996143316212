"""Backlog-aware gap deadlines (semantics §4), on a real broker.

A gap never times out while its fill may be waiting unread in the
partition: the deadline fires only when processing time has passed it *and*
the partition has been read to the end of its log (or to records
timestamped past the deadline). Time that seqgate was down, or spent behind
a backlog, is not charged to the producers.

test_restart_behind_backlog_times_out_nothing: seqgate parks v3 of 20
aggregates (v2 missing), stops; while it is down the producers write a
backlog of other aggregates' events and then every v2, all within
gap_timeout_ms of the parking; seqgate comes back after longer than
gap_timeout_ms and must read through the backlog to the fills without a
single gap timeout: every aggregate comes out 1 2 3, the DLQ stays empty.
"""

from __future__ import annotations

import json
import time

from kafkautil import consume_all, create_topics, produce, unique_name
from seqgate_proc import Seqgate, make_config, wait_until

SOURCE = "urn:example:backlog"
GAP_TIMEOUT_MS = 6000
N_AGG = 20
N_BACKLOG = 3000


def event(agg: str, seq: int) -> dict:
    return {
        "key": agg.encode(),
        "value": json.dumps({"agg": agg, "seq": seq}).encode(),
        "headers": [("ce_specversion", b"1.0"),
                    ("ce_id", f"{agg}-v{seq}".encode()),
                    ("ce_source", SOURCE.encode()),
                    ("ce_type", b"t"),
                    ("ce_sequence", str(seq).encode())],
        "partition": 0,
    }


def test_restart_behind_backlog_times_out_nothing(bootstrap, seqgate_bin,
                                                  tmp_path):
    n = {k: unique_name(f"sgbk-{k}") for k in ("in", "out", "dlq", "group")}
    create_topics(bootstrap, {n["in"]: 1, n["out"]: 1, n["dlq"]: 1})
    conf = make_config(bootstrap=bootstrap, group=n["group"], instance="bk-1",
                       data_dir=str(tmp_path / "data"), input_topic=n["in"],
                       output_topic=n["out"], dlq_topic=n["dlq"],
                       gap_timeout_ms=GAP_TIMEOUT_MS, batch_max_records=50)
    aggs = [f"gap-{i:02d}" for i in range(N_AGG)]
    sg = Seqgate(seqgate_bin, conf, tmp_path / "sg")
    sg.start()
    try:
        produce(bootstrap, n["in"], [event(a, v) for a in aggs for v in (1, 3)])
        parked_at = time.monotonic()
        # every v1 out and every v3 parked (the store committed them)
        out = consume_all(bootstrap, n["out"], timeout_s=30, expect_count=N_AGG)
        assert len(out) == N_AGG

        def all_parked() -> bool:
            st = sg.last_stats()
            return bool(st) and st.get("parked_events") == N_AGG
        wait_until(all_parked, 30, "the v3 events parked")
        assert sg.stop() == 0
        # while seqgate is down, in time: a backlog, then the fills
        produce(bootstrap, n["in"],
                [event(f"bulk-{i % 500:03d}", i // 500 + 1)
                 for i in range(N_BACKLOG)])
        produce(bootstrap, n["in"], [event(a, 2) for a in aggs])
        assert time.monotonic() - parked_at < GAP_TIMEOUT_MS / 1000, \
            "the fills must be written before the deadline for this test"
        # seqgate comes back after the deadline passed
        time.sleep(max(0.0, parked_at + GAP_TIMEOUT_MS / 1000 + 2
                       - time.monotonic()))
        sg.start()
        total = N_AGG * 3 + N_BACKLOG
        out = consume_all(bootstrap, n["out"], timeout_s=60, expect_count=total)
        # let a few ticks pass after the fills: still no timeout
        time.sleep(1.5)
        assert sg.stop() == 0
        dlq = consume_all(bootstrap, n["dlq"], timeout_s=5)
        reasons = sorted({d["headers_dict"].get("__seqgate.errors.reason")
                          for d in dlq})
        assert dlq == [], f"{len(dlq)} DLQ records, reasons {reasons}"
        assert sg.last_stats()["gap_timeouts_total"] == 0, sg.last_stats()
        by_agg: dict[str, list[int]] = {}
        for r in out:
            by_agg.setdefault(r["key"].decode(), []).append(
                int(r["headers_dict"]["ce_sequence"]))
        for a in aggs:
            assert by_agg.get(a) == [1, 2, 3], (a, by_agg.get(a))
        assert len(out) == total
    finally:
        sg.cleanup()


def test_restart_with_nothing_new_still_times_out(bootstrap, seqgate_bin,
                                                  tmp_path):
    """The other side of the rule: a partition with nothing new to read after
    a restart is read to the end of its log, so a gap whose fill never comes
    does time out (the consumer has no position before its first record; the
    offset it started at stands for it)."""
    n = {k: unique_name(f"sgbk2-{k}") for k in ("in", "out", "dlq", "group")}
    create_topics(bootstrap, {n["in"]: 1, n["out"]: 1, n["dlq"]: 1})
    conf = make_config(bootstrap=bootstrap, group=n["group"], instance="bk-2",
                       data_dir=str(tmp_path / "data"), input_topic=n["in"],
                       output_topic=n["out"], dlq_topic=n["dlq"],
                       gap_timeout_ms=4000)
    sg = Seqgate(seqgate_bin, conf, tmp_path / "sg")
    sg.start()
    try:
        produce(bootstrap, n["in"], [event("lone", 1), event("lone", 3)])
        consume_all(bootstrap, n["out"], timeout_s=30, expect_count=1)

        def parked() -> bool:
            st = sg.last_stats()
            return bool(st) and st.get("parked_events") == 1
        wait_until(parked, 30, "v3 parked")
        assert sg.stop() == 0
        sg.start()
        dlq = consume_all(bootstrap, n["dlq"], timeout_s=30, expect_count=1)
        assert [d["headers_dict"]["__seqgate.errors.reason"] for d in dlq] == \
            [b"gap_timeout"], sg.log_tail()
        assert sg.stop() == 0
    finally:
        sg.cleanup()


def test_gap_that_fills_the_park_cap_times_out(bootstrap, seqgate_bin,
                                               tmp_path):
    """Semantics §4 "Which clock": with the default caps
    (max_parked_per_aggregate 1000, on_park_overflow pause) and exactly_once,
    aggregate g gets v1, never v2, then v3..v3002 at once. seqgate parks
    v3..v1002 and pauses the partition at v1003; the fill cannot arrive
    while the partition is paused, so the deadline runs on processing time:
    the 1000 parked events go to the DLQ gap_timeout, g is quarantined, the
    rest of g follows as aggregate_quarantined, and the aggregate written
    after them is applied. Before, the deadline waited for records it would
    never read and the partition stayed paused for good."""
    n = {k: unique_name(f"sgbk3-{k}") for k in ("in", "out", "dlq", "group")}
    create_topics(bootstrap, {n["in"]: 1, n["out"]: 1, n["dlq"]: 1})
    conf = make_config(bootstrap=bootstrap, group=n["group"], instance="bk-3",
                       data_dir=str(tmp_path / "data"), input_topic=n["in"],
                       output_topic=n["out"], dlq_topic=n["dlq"],
                       gap_timeout_ms=3000, guarantee="exactly_once")
    sg = Seqgate(seqgate_bin, conf, tmp_path / "sg")
    sg.start()
    try:
        produce(bootstrap, n["in"],
                [event("g", 1)] + [event("g", v) for v in range(3, 3003)]
                + [event("after", 1), event("after", 2)])
        dlq = consume_all(bootstrap, n["dlq"], timeout_s=90,
                          expect_count=3000)
        reasons: dict[bytes, int] = {}
        for d in dlq:
            r = d["headers_dict"]["__seqgate.errors.reason"]
            reasons[r] = reasons.get(r, 0) + 1
        assert reasons == {b"gap_timeout": 1000,
                           b"aggregate_quarantined": 2000}, \
            (reasons, sg.log_tail())
        out = consume_all(bootstrap, n["out"], timeout_s=30, expect_count=3)
        assert [(r["key"], r["headers_dict"]["ce_sequence"]) for r in out] == \
            [(b"g", b"1"), (b"after", b"1"), (b"after", b"2")]
        st = sg.last_stats()
        assert st["gap_timeouts_total"] == 1, st
        assert sg.stop() == 0
    finally:
        sg.cleanup()
