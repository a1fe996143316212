"""Standby replicas (semantics §6 "Standby replicas"): an instance keeps the
store of partitions it does not own current by tailing their changelogs, so
that a failover to it restores only the tail.

test_standby_failover[paused|under_load-exactly_once|at_least_once]:
instances A and B, 6
input partitions, standby_replicas 1 (with two members each is standby for
the other's partitions). A feeder produces events of 12 aggregates for a
while, so that each changelog partition holds hundreds of records; then it
pauses until B's /readyz says its standby partitions have no lag. A is
killed with SIGKILL; the feeder resumes; B is assigned A's partitions.
With "under_load" the feeder does not pause: A is killed while it writes,
B's standby a drain turn or two behind. Checked:
  - B tailed every partition A owned before the kill (standby_tailing);
  - B's restore of each of them (restore_done after the kill) started
    from B's standby checkpoint, not from the log start, and read at most
    a few records (what A wrote after the feeder paused: nothing but, with
    at_least_once, nothing either — its markers were read), while a
    restore without the standby would have read the whole changelog
    partition (its end minus its start, printed); under load, it read
    less than half of that (the changelog grew for 12 s; the standby
    applies what was fetched every second; in practice 0 too: the tail
    consumer goes on fetching and the loop applying while the group waits
    out A's session timeout, before B is assigned A's partitions);
  - /metrics had a seqgate_standby_lag sample per standby partition;
  - the output holds every event, per aggregate in version order: with
    exactly_once exactly once (read_committed); with at_least_once each
    event's first copy in order (the batch in flight at the kill may
    repeat);
  - B stopped with exit status 0, nothing reached the DLQ.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections import defaultdict

import pytest

from kafkautil import consume_all, create_topics, end_offsets, unique_name
from seqgate_proc import Seqgate, make_config, wait_until
from test_cooperative import AGGS, PARTS, Feeder, owned, parts_of
from test_exactly_once import Probe, check_exactly_once

# records a failover restore may read with the standby caught up: none are
# written after the feeder paused but by the dead owner's last, already
# read batch; a small margin for a batch in flight at the pause
TAIL_MAX = 20


def get_json(url: str) -> dict:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:  # 503 carries the same JSON
        return json.loads(e.read())


def get_text(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.read().decode()


@pytest.mark.parametrize("guarantee", ["exactly_once", "at_least_once"])
@pytest.mark.parametrize("mode", ["paused", "under_load"])
def test_standby_failover(bootstrap, seqgate_bin, tmp_path, guarantee, mode):
    tag = "eos" if guarantee == "exactly_once" else "alo"
    t_in, t_out, t_dlq = (unique_name(f"sby{tag}-in"),
                          unique_name(f"sby{tag}-out"),
                          unique_name(f"sby{tag}-dlq"))
    group = unique_name(f"sg-sby{tag}")
    create_topics(bootstrap, {t_in: PARTS, t_out: PARTS, t_dlq: 1})

    def conf(instance: str) -> dict:
        c = make_config(bootstrap=bootstrap, group=group, instance=instance,
                        data_dir=str(tmp_path / f"data-{instance}"),
                        input_topic=t_in, output_topic=t_out,
                        dlq_topic=t_dlq, gap_timeout_ms=600000,
                        guarantee=guarantee)
        c["standby_replicas"] = 1
        c["kafka_consumer"].update({"session.timeout.ms": "6000",
                                    "heartbeat.interval.ms": "1000"})
        return c

    probe = Probe(bootstrap, group)
    a = Seqgate(seqgate_bin, conf(f"sby-{tag}-a"), tmp_path / "run-a")
    b = Seqgate(seqgate_bin, conf(f"sby-{tag}-b"), tmp_path / "run-b")
    feeder = Feeder(bootstrap, t_in, first=1, pause_s=0.02)

    def tails() -> str:
        return "".join(f"\n--- {n}:\n{s.log_tail(30)}"
                       for n, s in (("a", a), ("b", b)) if s.runs)

    try:
        a.start()
        b.start()
        wait_until(lambda: parts_of(a.events("partitions_assigned"))
                   and parts_of(b.events("partitions_assigned")), 60,
                   "A and B assigned", 0.25, on_timeout=tails)
        feeder.start()
        # the group settled: A's and B's partitions disjoint, all of them
        # (an eager rebalance revokes everything before assigning again)
        wait_until(lambda: owned(a) and owned(b)
                   and not owned(a) & owned(b)
                   and len(owned(a) | owned(b)) == PARTS, 60,
                   "the group settled", 0.25, on_timeout=tails)
        held_a = owned(a)
        # B tails every partition A owns
        wait_until(lambda: {f"{e['topic']}/{e['partition']}"
                            for e in b.events("standby_tailing")} >= held_a,
                   60, "B standby for A's partitions", 0.25, on_timeout=tails)
        time.sleep(12)  # the changelogs grow while B tails them
        if mode == "under_load":
            sb = b.http_url("/metrics")
            assert held_a == owned(a), "the assignment moved before the kill"
            restores0 = len(b.events("restore_done"))
            a.kill9()
            assert "seqgate_standby_lag{" in get_text(sb)
        # pause: B's standby catches up with everything A wrote
        feeder.halt.set()
        feeder.join(60)
        assert not feeder.errors, feeder.errors[:3]
        paused_at = feeder.next
        ready_url = b.http_url("/readyz")
        if mode == "under_load":
            restores_kill = restores0

        def caught_up() -> bool:
            sb = get_json(ready_url).get("standbys", [])
            mine = {f"{s['topic']}/{s['partition']}": s.get("standby_lag")
                    for s in sb}
            return set(mine) >= held_a and all(
                mine[p] == 0 for p in held_a)
        if mode == "paused":
            wait_until(caught_up, 60, "B's standby lag 0", 0.25,
                       on_timeout=lambda: json.dumps(get_json(ready_url)) +
                       tails())
            prom = get_text(b.http_url("/metrics"))
            for p in held_a:
                topic, part = p.rsplit("/", 1)
                assert (f'seqgate_standby_lag{{topic="{topic}",'
                        f'partition="{part}"}} 0') in prom, prom[-2000:]
            assert held_a == owned(a), "the assignment moved before the kill"
            restores_kill = len(b.events("restore_done"))
            a.kill9()

        feeder = Feeder(bootstrap, t_in, first=paused_at, pause_s=0.05)
        feeder.start()
        wait_until(lambda: parts_of(b.events("partitions_assigned"))
                   >= held_a | owned(b), 60, "B assigned A's partitions",
                   0.25, on_timeout=tails)
        moved = {f"{e['topic']}/{e['partition']}": e
                 for e in b.events("restore_done")[restores_kill:]}
        assert set(moved) >= held_a, (sorted(moved), tails())
        for p in sorted(held_a):
            e = moved[p]
            full = e["end"] - e["log_start"]
            print(f"{guarantee} {mode} failover restore of {p}: read "
                  f"{e['records']} records, offsets {e['from']}..{e['end']}"
                  f" (without the standby: {full} offsets from "
                  f"{e['log_start']}), {e['ms']} ms")
            assert e["from"] > e["log_start"], (p, e)
            assert full > 100, (p, e)  # a changelog worth a standby
            if mode == "paused":
                assert e["records"] <= TAIL_MAX, (p, e)
            else:
                assert 2 * (e["end"] - e["from"]) < full, (p, e)
        assert any(e.get("reason") == "assigned here"
                   for e in b.events("standby_stopped")), tails()
        time.sleep(3)
        last = feeder.stop()
        end = end_offsets(bootstrap, t_in)
        wait_until(lambda: probe.committed(t_in, PARTS) == end, 90,
                   "the group's commit of every input record", 0.25,
                   on_timeout=tails)
        assert b.stop() == 0, b.log_tail()
    finally:
        if feeder.is_alive():
            feeder.halt.set()
            feeder.join(60)
        a.cleanup()
        b.cleanup()
        probe.close()

    expected = {agg: list(range(1, last + 1)) for agg in AGGS}
    out = consume_all(bootstrap, t_out, timeout_s=60)
    if guarantee == "exactly_once":
        check_exactly_once(out, expected, "standby failover")
    else:
        first: dict[str, list[int]] = defaultdict(list)
        seen: set[str] = set()
        for r in out:
            h = r["headers_dict"]
            eid = h["ce_id"].decode()
            if eid in seen:
                continue
            seen.add(eid)
            first[r["key"].decode()].append(int(h["ce_sequence"]))
        assert dict(first) == expected, "at_least_once: first copies"
    assert not consume_all(bootstrap, t_dlq, timeout_s=5)


@pytest.mark.parametrize("guarantee", ["exactly_once", "at_least_once"])
def test_standby_second_failover(bootstrap, seqgate_bin, tmp_path,
                                 guarantee):
    """A partition revoked from an instance becomes standby there, and a
    second failover is short too: A is killed while it writes (B takes
    every partition), A starts again (its store kept: it restores what it
    is assigned from its own checkpoints, and is standby for B's
    partitions, which were its own before the kill: with at_least_once
    their changelogs hold A's cut batch, void once B claimed them, which a
    standby's checkpoint passes only once B's repair is proved), the
    feeder pauses until A's standby lag is 0, B is killed: A's restore of
    each of B's partitions reads at most TAIL_MAX records, and the output
    is complete (exactly once with exactly_once). The member ids are
    ordered (client.id) so that A's second run is standby for exactly its
    own former partitions."""
    tag = "eos2" if guarantee == "exactly_once" else "alo2"
    t_in, t_out, t_dlq = (unique_name(f"sby{tag}-in"),
                          unique_name(f"sby{tag}-out"),
                          unique_name(f"sby{tag}-dlq"))
    group = unique_name(f"sg-sby{tag}")
    create_topics(bootstrap, {t_in: PARTS, t_out: PARTS, t_dlq: 1})

    def conf(instance: str) -> dict:
        c = make_config(bootstrap=bootstrap, group=group, instance=instance,
                        data_dir=str(tmp_path / f"data-{instance}"),
                        input_topic=t_in, output_topic=t_out,
                        dlq_topic=t_dlq, gap_timeout_ms=600000,
                        guarantee=guarantee)
        c["standby_replicas"] = 1
        c["kafka_consumer"].update({"session.timeout.ms": "6000",
                                    "heartbeat.interval.ms": "1000"})
        return c

    probe = Probe(bootstrap, group)
    # The range assignor gives the first partitions to the first member
    # by member id (client.id + a UUID): A first, B second; A's second
    # run ("sg-c") after B, so that it gets B's partitions and is standby
    # for its own former ones.
    ca, cb = conf(f"sby-{tag}-a"), conf(f"sby-{tag}-b")
    ca["kafka_consumer"]["client.id"] = "sg-a"
    cb["kafka_consumer"]["client.id"] = "sg-b"
    a = Seqgate(seqgate_bin, ca, tmp_path / "run-a")
    b = Seqgate(seqgate_bin, cb, tmp_path / "run-b")
    feeder = Feeder(bootstrap, t_in, first=1, pause_s=0.02)

    def tails() -> str:
        return "".join(f"\n--- {n}:\n{s.log_tail(30)}"
                       for n, s in (("a", a), ("b", b)) if s.runs)

    def settled() -> bool:
        return bool(owned(a) and owned(b) and not owned(a) & owned(b)
                    and len(owned(a) | owned(b)) == PARTS)

    def tailing(sg: Seqgate) -> set[str]:
        return {f"{e['topic']}/{e['partition']}"
                for e in sg.events("standby_tailing")}

    try:
        a.start()
        b.start()
        feeder.start()
        wait_until(settled, 60, "the group settled", 0.25, on_timeout=tails)
        held_a1 = owned(a)
        wait_until(lambda: tailing(b) >= held_a1, 60,
                   "B standby for A's partitions", 0.25, on_timeout=tails)
        time.sleep(6)
        a.kill9()  # while it writes
        wait_until(lambda: len(owned(b)) == PARTS, 60,
                   "B assigned every partition", 0.25, on_timeout=tails)
        time.sleep(3)
        ca["kafka_consumer"]["client.id"] = "sg-c"
        a.config_path.write_text(json.dumps(ca))
        a.start(wait_assigned=False)
        wait_until(lambda: a.running() and settled(), 90,
                   "the group settled again", 0.25, on_timeout=tails)
        held_b = owned(b)
        assert held_b == held_a1, (
            "A's second run was to get B's former partitions, B A's: "
            f"A had {sorted(held_a1)}, B has {sorted(held_b)}" + tails())
        wait_until(lambda: tailing(a) >= held_b, 60,
                   "A standby for B's partitions", 0.25, on_timeout=tails)
        time.sleep(5)
        feeder.halt.set()
        feeder.join(60)
        assert not feeder.errors, feeder.errors[:3]
        paused_at = feeder.next
        ready_url = a.http_url("/readyz")

        def caught_up() -> bool:
            sb = {f"{s['topic']}/{s['partition']}": s.get("standby_lag")
                  for s in get_json(ready_url).get("standbys", [])}
            return set(sb) >= held_b and all(sb[p] == 0 for p in held_b)
        wait_until(caught_up, 60, "A's standby lag 0", 0.25,
                   on_timeout=lambda: json.dumps(get_json(ready_url)) +
                   tails())
        assert held_b == owned(b), "the assignment moved before the kill"
        restores_kill = len(a.events("restore_done"))
        b.kill9()
        feeder = Feeder(bootstrap, t_in, first=paused_at, pause_s=0.05)
        feeder.start()
        wait_until(lambda: len(owned(a)) == PARTS, 60,
                   "A assigned every partition", 0.25, on_timeout=tails)
        moved = {f"{e['topic']}/{e['partition']}": e
                 for e in a.events("restore_done")[restores_kill:]}
        assert set(moved) >= held_b, (sorted(moved), tails())
        for p in sorted(held_b):
            e = moved[p]
            print(f"{guarantee} second failover restore of {p} "
                  f"(A's before its kill): "
                  f"read {e['records']} records, offsets "
                  f"{e['from']}..{e['end']} (log start {e['log_start']})")
            assert e["from"] > e["log_start"], (p, e)
            assert e["records"] <= TAIL_MAX, (p, e)
        time.sleep(3)
        last = feeder.stop()
        end = end_offsets(bootstrap, t_in)
        wait_until(lambda: probe.committed(t_in, PARTS) == end, 90,
                   "the group's commit of every input record", 0.25,
                   on_timeout=tails)
        assert a.stop() == 0, a.log_tail()
    finally:
        if feeder.is_alive():
            feeder.halt.set()
            feeder.join(60)
        a.cleanup()
        b.cleanup()
        probe.close()

    expected = {agg: list(range(1, last + 1)) for agg in AGGS}
    out = consume_all(bootstrap, t_out, timeout_s=60)
    if guarantee == "exactly_once":
        check_exactly_once(out, expected, "second standby failover")
    else:
        first: dict[str, list[int]] = defaultdict(list)
        seen: set[str] = set()
        for r in out:
            h = r["headers_dict"]
            eid = h["ce_id"].decode()
            if eid not in seen:
                seen.add(eid)
                first[r["key"].decode()].append(int(h["ce_sequence"]))
        assert dict(first) == expected, "at_least_once: first copies"
    assert not consume_all(bootstrap, t_dlq, timeout_s=5)
