"""Takeover of a dead owner's open transaction (semantics §6 "Taking over
from a dead owner"): an exactly_once instance that is assigned the
partitions of an owner that died inside a transaction aborts that
transaction at once, by fencing the dead owner's transactional id, instead
of waiting for the transaction coordinator to time it out
(transaction.timeout.ms, then the broker's abort check: 10-20 s in which
every partition the new owner restores waits).

test_takeover_fences_dead_owner: instances A and B, 6 input partitions, a
feeder producing all the while. B is stopped (SIGSTOP; with gdb, at a
breakpoint at rd_kafka_send_offsets_to_transaction: after a batch's
deliveries, before its offsets join the transaction) at a moment when one
of its changelog partitions holds an open transaction (its last stable
offset below its high watermark half a second after the stop: nothing but
B can end it), and none of the group's committed offsets is pending (B had
not sent its offsets to that transaction yet: a stop in that window makes
A wait for the offsets before its restore, the next test's case). B's
session times out, A is assigned B's partitions, A's restore of a
changelog partition stops at that transaction (the instances
run with transaction.timeout.ms 120 s, so that the coordinator's own abort
never comes first, however slow the rebalance on a loaded machine). Checked:
  - A logged "takeover_fenced" naming B's transactional id
    (<group.id>-<instance_id>) for a changelog partition that held B's open
    transaction, and A's restores of B's partitions ended after it;
  - B, resumed (SIGCONT), finds itself fenced and exits non-zero: a zombie
    writes nothing more;
  - A is never fenced, stops with exit status 0, and the output holds every
    event exactly once (read_committed), per aggregate in version order.
On a build without the takeover A waits for the coordinator's own abort
and logs no "takeover_fenced": the first check fails.

test_takeover_fences_owner_with_pending_offsets: the same group, B stopped
between sending a batch's input offsets to its transaction and the commit
(a breakpoint at rd_kafka_commit_transaction: stop_at), so that the
group's committed offsets of B's partitions are pending (KIP-447) and A,
assigned them, waits for them before any restore (committed_offsets_pending).
Checked: A fenced B's transactional id from that wait ("trigger":
"committed_offsets"), restored B's partitions and committed past where
they stood within 60 + 30 s of the stop (the coordinator's own abort comes
only after transaction.timeout.ms, 120 s); B resumed is fenced; the output
holds every event exactly once. On a build that waits at the pending
offsets without the takeover, A logs committed_offsets_pending and is not
assigned B's partitions within 60 s.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import time

import pytest
from confluent_kafka import KafkaException, TopicPartition

from kafkautil import CommittedOffsets, consume_all, create_topics
from kafkautil import end_offsets, stable_offsets, unique_name
from seqgate_proc import Seqgate, make_config, wait_until
from test_cooperative import AGGS, PARTS, Feeder, owned
from test_exactly_once import Probe, changelog_of, check_exactly_once

GDB = shutil.which("gdb")


def offsets_pending(bootstrap: str, group: str, topic: str,
                    parts: set[int]) -> bool:
    """True if a committed offset of `group` on `topic`'s `parts` (B's: A
    commits its own all the while) is held by an undecided transaction
    (KIP-447: a read_committed member cannot read it yet, and waits for it
    before its restore: committed_offsets_pending, where the second test's
    takeover runs)."""
    c = CommittedOffsets(bootstrap, group, require_stable=True)
    try:
        c.consumer.committed([TopicPartition(topic, p) for p in parts],
                             timeout=2.0)
        return False
    except KafkaException:
        return True
    finally:
        c.close()


def conf(bootstrap: str, group: str, tmp_path, instance: str, t_in: str,
         t_out: str, t_dlq: str) -> dict:
    """An exactly_once instance of the tests: a short session timeout, and
    transaction.timeout.ms 120 s."""
    c = make_config(bootstrap=bootstrap, group=group, instance=instance,
                    data_dir=str(tmp_path / f"data-{instance}"),
                    input_topic=t_in, output_topic=t_out,
                    dlq_topic=t_dlq, gap_timeout_ms=600000,
                    guarantee="exactly_once")
    c["kafka_consumer"].update({"session.timeout.ms": "6000",
                                "heartbeat.interval.ms": "1000"})
    # the coordinator's own abort must not come first: under load the
    # session timeout and the rebalance took 17 s, past seqgate's
    # 10 s transaction timeout (then the test sees nothing to fence)
    c["kafka_producer"]["transaction.timeout.ms"] = "120000"
    return c


# Alone, after the tests that run side by side (conftest.py). Random stops
# (80 tries) are the fallback without gdb only: since batches close as soon
# as their records are in, B's transactions are so short that 80 random
# stops all missed one once ("B never stopped inside a transaction").
@pytest.mark.serial
def test_takeover_fences_dead_owner(bootstrap, seqgate_bin, tmp_path):
    t_in, t_out, t_dlq = (unique_name("tko-in"), unique_name("tko-out"),
                          unique_name("tko-dlq"))
    group = unique_name("sg-tko")
    create_topics(bootstrap, {t_in: PARTS, t_out: PARTS, t_dlq: 1})
    changelog = changelog_of(group, t_in)

    probe = Probe(bootstrap, group)
    a = Seqgate(seqgate_bin, conf(bootstrap, group, tmp_path, "tko-a", t_in,
                                  t_out, t_dlq), tmp_path / "run-a")
    b = Seqgate(seqgate_bin, conf(bootstrap, group, tmp_path, "tko-b", t_in,
                                  t_out, t_dlq), tmp_path / "run-b")
    feeder = Feeder(bootstrap, t_in, first=1, pause_s=0.01)
    rng = random.Random()
    stopped = False

    def tails() -> str:
        return "".join(f"\n--- {n}:\n{s.log_tail(30)}"
                       for n, s in (("a", a), ("b", b)) if s.runs)

    try:
        a.start()
        b.start()
        feeder.start()
        wait_until(lambda: owned(a) and owned(b)
                   and not owned(a) & owned(b)
                   and len(owned(a) | owned(b)) == PARTS, 60,
                   "the group settled", 0.25, on_timeout=tails)
        held_b = owned(b)
        b_parts = {int(p.rsplit("/", 1)[1]) for p in held_b}
        time.sleep(3)
        # stop B inside a transaction that wrote to one of its changelog
        # partitions: half a second after the stop, that partition's last
        # stable offset is still below its high watermark (a commit's
        # markers would have landed by then)
        open_parts: set[int] = set()
        gdb_out = ""
        for _ in range(10 if GDB else 80):
            if GDB:
                # after the batch's deliveries, before its offsets join
                # the transaction: every try is inside one
                gdb_out = stop_at(b.proc.pid,
                                  "rd_kafka_send_offsets_to_transaction")
                if "ptrace: Operation not permitted" in gdb_out:
                    pytest.skip("gdb may not attach here (ptrace refused: "
                                "kernel.yama.ptrace_scope, or no "
                                "CAP_SYS_PTRACE)")
            else:
                os.kill(b.proc.pid, signal.SIGSTOP)
            stopped = True
            time.sleep(0.5)
            so = stable_offsets(bootstrap, changelog)
            open_parts = {p for p in b_parts if so[p][0] < so[p][1]}
            # not between sending its offsets and the commit: that
            # window is the next test's (a takeover from on_assign's wait
            # for the offsets, before any restore)
            if open_parts and not offsets_pending(bootstrap, group, t_in,
                                                  b_parts):
                break
            open_parts = set()
            os.kill(b.proc.pid, signal.SIGCONT)
            stopped = False
            time.sleep(rng.uniform(0.05, 0.3))
        assert open_parts, ("B never stopped inside a transaction\n"
                            + gdb_out + tails())
        assert held_b == owned(b), "the assignment moved before the stop"
        restores0 = len(a.events("restore_done"))
        wait_until(lambda: owned(a) >= held_b, 60,
                   "A assigned B's partitions", 0.25, on_timeout=tails)
        wait_until(lambda: {f"{e['topic']}/{e['partition']}" for e in
                            a.events("restore_done")[restores0:]} >= held_b,
                   60, "A restored B's partitions", 0.25, on_timeout=tails)
        fenced = a.events("takeover_fenced")
        tid_b = f"{group}-tko-b"
        assert fenced, ("A did not fence B's open transaction (no "
                        "takeover_fenced)" + tails())
        assert all(e["transactional_id"] == tid_b for e in fenced), fenced
        assert {e["partition"] for e in fenced} & open_parts, (
            fenced, open_parts)
        assert all(e["changelog"] == changelog for e in fenced), fenced
        assert all(e["trigger"] == "restore" for e in fenced), fenced
        # A's restores of the partitions B's transaction had left open ended
        # after the takeover (the others had nothing to wait for and may end
        # before it)
        lines = a.log_lines()
        at = next(i for i, e in enumerate(lines)
                  if e.get("event") == "takeover_fenced")
        for p in sorted(p for p in held_b
                        if int(p.rsplit("/", 1)[1]) in open_parts):
            done = [i for i, e in enumerate(lines)
                    if e.get("event") == "restore_done"
                    and f"{e['topic']}/{e['partition']}" == p]
            assert done and done[-1] > at, (p, tails())
        print(f"\ntakeover: B stopped inside a transaction on changelog "
              f"partitions {sorted(open_parts)}; A fenced {tid_b}: "
              + "; ".join(f"partition {e['partition']} after "
                          f"{e['waited_ms']} ms of waiting, "
                          f"{e['ms']} ms to fence" for e in fenced))
        # the zombie resumes: fenced, it stops
        stopped = False
        last = resume_fenced_then_finish(a, b, feeder, probe, bootstrap, t_in,
                                         tails)
    finally:
        if stopped and b.running():
            os.kill(b.proc.pid, signal.SIGCONT)
        if feeder.is_alive():
            feeder.halt.set()
            feeder.join(60)
        a.cleanup()
        b.cleanup()
        probe.close()

    check_output(bootstrap, t_out, t_dlq, last, "takeover of a dead owner")


def resume_fenced_then_finish(a, b, feeder, probe, bootstrap: str, t_in: str,
                              tails) -> int:
    """Resumes the stopped B (SIGCONT), which must exit non-zero with a
    "fenced" line; stops the feeder, waits for the group's commit of every
    input record and stops A cleanly, itself never fenced. @returns the
    feeder's last version."""
    os.kill(b.proc.pid, signal.SIGCONT)
    rc_b = b.wait_exit(90)
    assert rc_b != 0, b.log_tail()
    assert b.events("fenced"), b.log_tail()
    time.sleep(2)
    last = feeder.stop()
    end = end_offsets(bootstrap, t_in)
    wait_until(lambda: probe.committed(t_in, PARTS) == end, 90,
               "the group's commit of every input record", 0.25,
               on_timeout=tails)
    assert not a.events("fenced"), a.log_tail()
    assert a.stop() == 0, a.log_tail()
    return last


def check_output(bootstrap: str, t_out: str, t_dlq: str, last: int,
                 what: str) -> None:
    """Every aggregate's versions 1..last exactly once, in order, read
    read_committed; nothing dead-lettered."""
    expected = {agg: list(range(1, last + 1)) for agg in AGGS}
    out = consume_all(bootstrap, t_out, timeout_s=60)
    check_exactly_once(out, expected, what)
    assert not consume_all(bootstrap, t_dlq, timeout_s=5)


def stop_at(pid: int, function: str, timeout_s: float = 60.0) -> str:
    """Stops process `pid` (SIGSTOP) at the start of its next call of
    `function`: a breakpoint there (gdb attached for the moment), then
    SIGSTOP queued and gdb detached, so that the process stops the instant
    it runs again. In an exactly_once batch seqgate awaits the deliveries of
    its output and changelog records, then calls
    rd_kafka_send_offsets_to_transaction, then rd_kafka_commit_transaction
    (lib/kafka_txn.c): stopped at the first, the batch's transaction is open
    on the changelog with no offsets sent; at the second, its input offsets
    are pending at the group coordinator (KIP-447) and no EndTxn sent. Each
    window is hit every time instead of once in hundreds of random stops.
    Returns gdb's output (it names the breakpoint when it was hit)."""
    r = subprocess.run(
        [GDB, "-p", str(pid), "-batch", "-nx", "-q",
         "-ex", "set pagination off", "-ex", "set confirm off",
         "-ex", f"break {function}",
         "-ex", "continue",
         "-ex", f"shell kill -STOP {pid}",
         "-ex", "delete",
         "-ex", "detach"],
        capture_output=True, text=True, timeout=timeout_s)
    return r.stdout + r.stderr


# Alone (conftest.py): it stops B at a breakpoint and times the takeover.
@pytest.mark.serial
@pytest.mark.skipif(GDB is None, reason="gdb (tests/install-deps.sh) stops "
                    "B between sending its offsets and the commit")
def test_takeover_fences_owner_with_pending_offsets(bootstrap, seqgate_bin,
                                                    tmp_path):
    t_in, t_out, t_dlq = (unique_name("tkp-in"), unique_name("tkp-out"),
                          unique_name("tkp-dlq"))
    group = unique_name("sg-tkp")
    create_topics(bootstrap, {t_in: PARTS, t_out: PARTS, t_dlq: 1})
    changelog = changelog_of(group, t_in)
    probe = Probe(bootstrap, group)
    a = Seqgate(seqgate_bin, conf(bootstrap, group, tmp_path, "tkp-a", t_in,
                                  t_out, t_dlq), tmp_path / "run-a")
    b = Seqgate(seqgate_bin, conf(bootstrap, group, tmp_path, "tkp-b", t_in,
                                  t_out, t_dlq), tmp_path / "run-b")
    feeder = Feeder(bootstrap, t_in, first=1, pause_s=0.01)
    stopped = False

    def tails() -> str:
        return "".join(f"\n--- {n}:\n{s.log_tail(30)}"
                       for n, s in (("a", a), ("b", b)) if s.runs)

    try:
        a.start()
        b.start()
        feeder.start()
        wait_until(lambda: owned(a) and owned(b)
                   and not owned(a) & owned(b)
                   and len(owned(a) | owned(b)) == PARTS, 60,
                   "the group settled", 0.25, on_timeout=tails)
        held_b = owned(b)
        b_parts = {int(p.rsplit("/", 1)[1]) for p in held_b}
        time.sleep(3)
        # stop B between sending a batch's offsets to its transaction and
        # the commit: its offsets pending, its changelog partitions open
        open_parts: set[int] = set()
        gdb_out = ""
        for _ in range(10):
            gdb_out = stop_at(b.proc.pid, "rd_kafka_commit_transaction")
            if "ptrace: Operation not permitted" in gdb_out:
                pytest.skip("gdb may not attach here (ptrace refused: "
                            "kernel.yama.ptrace_scope, or no CAP_SYS_PTRACE)")
            stopped = True
            time.sleep(0.5)
            so = stable_offsets(bootstrap, changelog)
            open_parts = {p for p in b_parts if so[p][0] < so[p][1]}
            # (a transaction of changelog id records only sends no offsets)
            if open_parts and offsets_pending(bootstrap, group, t_in, b_parts):
                break
            open_parts = set()
            os.kill(b.proc.pid, signal.SIGCONT)
            stopped = False
            time.sleep(0.3)
        assert open_parts, ("B never stopped with its offsets pending\n"
                            + gdb_out + tails())
        assert held_b == owned(b), "the assignment moved before the stop"
        committed0 = probe.committed(t_in, PARTS)
        restores0 = len(a.events("restore_done"))
        t_stop = time.monotonic()
        wait_until(lambda: owned(a) >= held_b, 60,
                   "A assigned B's partitions", 0.25, on_timeout=tails)
        # transaction.timeout.ms is 120 s: only the takeover ends the wait
        # in time (the coordinator's own abort comes 120-130 s after the
        # transaction began)
        wait_until(lambda: {f"{e['topic']}/{e['partition']}" for e in
                            a.events("restore_done")[restores0:]} >= held_b,
                   60, "A restored B's partitions", 0.25, on_timeout=tails)
        pending = a.events("committed_offsets_pending")
        assert pending, ("A never waited for pending offsets: B was not "
                         "stopped inside the window" + tails())
        fenced = a.events("takeover_fenced")
        tid_b = f"{group}-tkp-b"
        assert fenced, ("A did not fence B's open transaction (no "
                        "takeover_fenced)" + tails())
        assert all(e["transactional_id"] == tid_b for e in fenced), fenced
        assert all(e["changelog"] == changelog for e in fenced), fenced
        assert {e["partition"] for e in fenced} <= open_parts, (
            fenced, open_parts)
        assert any(e.get("trigger") == "committed_offsets" for e in fenced), (
            fenced)
        # A reads on where the aborted transaction began: the group's
        # offsets of B's partitions move past where they stood
        wait_until(lambda: all(probe.committed(t_in, PARTS)[p] > committed0[p]
                               for p in b_parts), 30,
                   "A's commit of B's partitions", 0.25, on_timeout=tails)
        took = time.monotonic() - t_stop
        print(f"\ntakeover at pending offsets: B stopped with offsets "
              f"pending, changelog partitions {sorted(open_parts)} open; A "
              f"fenced {tid_b} ("
              + "; ".join(f"{e.get('trigger')} partition {e['partition']} "
                          f"after {e['waited_ms']} ms of waiting, "
                          f"{e['ms']} ms to fence" for e in fenced)
              + f"); B's partitions committed by A {took:.1f} s after the "
              f"stop")
        # the zombie resumes into its commit: fenced, it stops
        stopped = False
        last = resume_fenced_then_finish(a, b, feeder, probe, bootstrap, t_in,
                                         tails)
    finally:
        if stopped and b.running():
            os.kill(b.proc.pid, signal.SIGCONT)
        if feeder.is_alive():
            feeder.halt.set()
            feeder.join(60)
        a.cleanup()
        b.cleanup()
        probe.close()

    check_output(bootstrap, t_out, t_dlq, last, "takeover at pending offsets")
