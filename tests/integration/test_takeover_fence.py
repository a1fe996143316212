"""Takeover of a dead owner's open transaction (semantics §6 "Taking over
from a dead owner"): an exactly_once instance that is assigned the
partitions of an owner that died inside a transaction aborts that
transaction at once, by fencing the dead owner's transactional id, instead
of waiting for the transaction coordinator to time it out
(transaction.timeout.ms, then the broker's abort check: 10-20 s in which
every partition the new owner restores waits).

test_takeover_fences_dead_owner: instances A and B, 6 input partitions, a
feeder producing all the while. B is stopped (SIGSTOP) at a moment when one
of its changelog partitions holds an open transaction (its last stable
offset below its high watermark half a second after the stop: nothing but
B can end it), and none of the group's committed offsets is pending (B had
not sent its offsets to that transaction yet: a stop in that window makes
A wait for the offsets before its restore, a case left to the coordinator,
semantics §6). B's session times out, A is assigned B's partitions, A's
restore of a changelog partition stops at that transaction (the instances
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
"""

from __future__ import annotations

import os
import random
import signal
import time

import pytest
from confluent_kafka import KafkaException, TopicPartition

from kafkautil import CommittedOffsets, consume_all, create_topics
from kafkautil import end_offsets, stable_offsets, unique_name
from seqgate_proc import Seqgate, make_config, wait_until
from test_cooperative import AGGS, PARTS, Feeder, owned
from test_exactly_once import Probe, changelog_of, check_exactly_once


def offsets_pending(bootstrap: str, group: str, topic: str,
                    parts: set[int]) -> bool:
    """True if a committed offset of `group` on `topic`'s `parts` (B's: A
    commits its own all the while) is held by an undecided transaction
    (KIP-447: a read_committed member cannot read it yet, and waits for it
    before its restore: committed_offsets_pending,
    the case semantics §6 "Taking over from a dead owner" leaves to the
    coordinator)."""
    c = CommittedOffsets(bootstrap, group, require_stable=True)
    try:
        c.consumer.committed([TopicPartition(topic, p) for p in parts],
                             timeout=2.0)
        return False
    except KafkaException:
        return True
    finally:
        c.close()


# Alone, after the tests that run side by side (conftest.py): it must stop B
# inside one of its short transactions (80 tries at random moments); beside
# three other workers on 2 cores it missed in all 60 tries once in three
# runs ("B never stopped inside a transaction").
@pytest.mark.serial
def test_takeover_fences_dead_owner(bootstrap, seqgate_bin, tmp_path):
    t_in, t_out, t_dlq = (unique_name("tko-in"), unique_name("tko-out"),
                          unique_name("tko-dlq"))
    group = unique_name("sg-tko")
    create_topics(bootstrap, {t_in: PARTS, t_out: PARTS, t_dlq: 1})
    changelog = changelog_of(group, t_in)

    def conf(instance: str) -> dict:
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

    probe = Probe(bootstrap, group)
    a = Seqgate(seqgate_bin, conf("tko-a"), tmp_path / "run-a")
    b = Seqgate(seqgate_bin, conf("tko-b"), tmp_path / "run-b")
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
        for _ in range(80):
            os.kill(b.proc.pid, signal.SIGSTOP)
            stopped = True
            time.sleep(0.5)
            so = stable_offsets(bootstrap, changelog)
            open_parts = {p for p in b_parts if so[p][0] < so[p][1]}
            # not between sending its offsets and the commit: that
            # window is left to the coordinator (semantics §6)
            if open_parts and not offsets_pending(bootstrap, group, t_in,
                                                  b_parts):
                break
            open_parts = set()
            os.kill(b.proc.pid, signal.SIGCONT)
            stopped = False
            time.sleep(rng.uniform(0.05, 0.3))
        assert open_parts, "B never stopped inside a transaction" + tails()
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
        os.kill(b.proc.pid, signal.SIGCONT)
        stopped = False
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
    finally:
        if stopped and b.running():
            os.kill(b.proc.pid, signal.SIGCONT)
        if feeder.is_alive():
            feeder.halt.set()
            feeder.join(60)
        a.cleanup()
        b.cleanup()
        probe.close()

    expected = {agg: list(range(1, last + 1)) for agg in AGGS}
    out = consume_all(bootstrap, t_out, timeout_s=60)
    check_exactly_once(out, expected, "takeover of a dead owner")
    assert not consume_all(bootstrap, t_dlq, timeout_s=5)
