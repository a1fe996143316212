"""The chaos suite's reading of the restores (run_chaos.restores()): which
partition moves a standby served (semantics §6 "Standby replicas"), what
those restores read and what a full restore would have read. With
`--standbys N` a run fails when no move was served by a standby, so the
count must be 0 for everything that is not one: these cases are the
log lines seqgate writes (abridged), in the order it writes them.

No broker, no seqgate: tests/run.sh runs this in its unit phase (the
venv's pytest).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run_chaos import owned, restores, standbys_ready  # noqa: E402

T = "chaos-in"


def stopped(p: int, reason: str, offset: int | None = None) -> dict:
    line = {"event": "standby_stopped", "topic": T, "partition": p,
            "reason": reason}
    if offset is not None:
        line["offset"] = offset
    return line


def done(p: int, frm: int, end: int, lo: int = 0, records: int = 0) -> dict:
    return {"event": "restore_done", "topic": T, "partition": p,
            "log_start": lo, "from": frm, "end": end, "records": records}


def test_a_caught_up_standby_serves_the_move():
    c, notes = restores([("sg-b", 0, [
        {"event": "standby_tailing", "topic": T, "partition": 3, "from": 0},
        stopped(3, "assigned here", 540),
        done(3, 540, 545, records=4),
        done(4, 300, 301),                       # its own partition
        {"event": "partitions_assigned"}])])
    assert (c["standby_moves"], c["standby_read"], c["standby_full"],
            c["standby_records"]) == (1, 5, 545, 4)
    assert c["restores"] == 2 and c["cold_restores"] == 0
    assert not notes


def test_not_served_by_a_standby():
    c, _notes = restores([
        # not caught up yet (no offset): cold, not a standby's move
        ("sg-a", 0, [stopped(0, "assigned here"), done(0, 0, 500)]),
        # placed elsewhere before its partition came here
        ("sg-a", 1, [stopped(1, "placed elsewhere", 200), done(1, 0, 400)]),
        # a restore from the instance's own checkpoint
        ("sg-a", 2, [done(2, 380, 400)]),
        # the standby was in an earlier run of the instance (killed): the
        # new run's restore is from that run's checkpoint, not a standby's
        ("sg-b", 0, [stopped(5, "assigned here", 90)]),
        ("sg-b", 1, [done(5, 90, 120)]),
        # "assigned here" at an empty changelog's start: nothing skipped
        ("sg-c", 0, [stopped(4, "assigned here", 0), done(4, 0, 0)]),
    ])
    assert c["standby_moves"] == 0, c
    assert c["standby_cold"] == 2          # partitions 0 and 4
    assert c["cold_restores"] == 2          # partitions 0 and 1
    assert c["cold_read"] == 900
    assert c["restores"] == 5


def test_a_standby_counts_for_its_next_restore_only():
    c, _notes = restores([("sg-a", 0, [
        stopped(2, "assigned here", 100), done(2, 100, 130),
        done(2, 130, 131),                       # assigned again later
    ])])
    assert c["standby_moves"] == 1 and c["standby_read"] == 30


def test_a_restore_elsewhere_than_the_standby_offset_is_noted():
    c, notes = restores([("sg-a", 0, [
        stopped(1, "assigned here", 100), done(1, 90, 130)])])
    assert c["standby_moves"] == 1
    assert notes and "stopped at 100" in notes[0]


def test_waits_for_a_transaction_and_takeovers_are_counted():
    c, _notes = restores([("sg-a", 0, [
        {"event": "takeover_waiting", "topic": T, "partition": 0},
        {"event": "restore_waiting_for_transaction", "topic": T,
         "partition": 0},
        done(0, 10, 20)]),
        ("sg-b", 0, [{"event": "takeover_fenced"},
                     {"event": "restore_waiting_for_transaction"}])])
    assert (c["tx_waits"], c["takeover_fenced"],
            c["takeover_waiting"]) == (2, 1, 1)


def test_owned_and_standbys_ready_follow_the_log():
    """What the failover kill waits for: the victim's partitions (owned())
    all tailed by caught-up standbys elsewhere (standbys_ready())."""
    lines = [
        {"event": "partitions_assigned", "partitions": [f"{T}/0", f"{T}/1"]},
        {"event": "standby_started", "topic": T, "partition": 2},
        {"event": "standby_started", "topic": T, "partition": 3},
        {"event": "standby_tailing", "topic": T, "partition": 2},
    ]
    assert owned(lines) == {f"{T}/0", f"{T}/1"}
    assert standbys_ready(lines) == {f"{T}/2"}     # 3 not caught up yet
    lines += [
        {"event": "partitions_revoked", "partitions": [f"{T}/0", f"{T}/1"]},
        {"event": "standby_stopped", "topic": T, "partition": 2,
         "offset": 5, "reason": "assigned here"},
        {"event": "partitions_assigned", "partitions": [f"{T}/2"]},
        {"event": "standby_tailing", "topic": T, "partition": 3},
        {"event": "standby_failed", "topic": T, "partition": 3},
    ]
    assert owned(lines) == {f"{T}/2"}
    assert standbys_ready(lines) == set()
