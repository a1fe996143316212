"""guarantee "exactly_once" on a real broker (semantics §6).

Kafka transactions carry each batch's output, DLQ and changelog records and
its input offsets; LMDB commits after; a compacted changelog topic per input
topic restores a store that is behind or absent. Every output check reads
with isolation.level=read_committed, as a downstream consumer would.

test_eos_clean_run: a stream with redeliveries and swapped versions over 3
  partitions: the output holds every distinct event exactly once, per
  aggregate in version order; the DLQ is empty; the changelog topic exists
  with 3 partitions and cleanup.policy=compact; transactions were counted.
test_eos_kill9_no_duplicates: the same kind of stream, seqgate killed with
  SIGKILL twice mid-stream and restarted: the output has NO duplicate and
  nothing missing (the at_least_once restart test allows the batch in
  flight twice; this one allows nothing).
test_eos_partition_moves_to_empty_store: instance A parks events behind a
  gap and stops; instance B (same group, another instance_id, an EMPTY
  data_dir) restores the partition from the changelog: the gap's filler
  drains the parked events, and redeliveries of A's events are dropped.
test_eos_same_instance_id_on_one_host: a second process on this host with
  the same group.id and instance_id (same transactional.id) and its own
  data_dir exits 2 at start naming the id, the group, the transactional id,
  the holder's pid and the fix; the first runs on; after its kill -9 a new
  start passes the claim and finishes the stream exactly once. (Across
  hosts the newer process fences the older, exit 1: not reproducible on one
  host, where the claim refuses the second first.)
test_eos_restore_time: the time to restore a changelog of ~100k records
  into an empty store (printed, not asserted), beside the delta restore of
  an instance that kept its store.
"""

from __future__ import annotations

import json
import random
import time
from collections import defaultdict

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from kafkautil import (CommittedOffsets, consume_all, create_topics, end_offsets,
                       produce, unique_name)
from seqgate_proc import (Seqgate, interleave, make_config, wait_until,
                          with_redeliveries)

SOURCE = "urn:example:eos"


# --------------------------------------------------------------------------
# helpers


def ce(agg: str, v: int, eid: str | None = None, pad: int = 0) -> dict:
    """One CloudEvents (binary mode) record of aggregate `agg`, version `v`."""
    eid = eid or f"{agg}-v{v}"
    value = json.dumps({"aggregate": agg, "version": v,
                        "data": "x" * (pad or v % 13)}).encode()
    return {"key": agg.encode(), "value": value,
            "headers": [("ce_specversion", b"1.0"), ("ce_id", eid.encode()),
                        ("ce_source", SOURCE.encode()),
                        ("ce_type", b"thing.updated"),
                        ("ce_sequence", str(v).encode())],
            "_id": eid, "_agg": agg, "_v": v}


def make_stream(rng: random.Random, n_aggs: int, versions: int, parts: int,
                dup_rate: float, swap_rate: float) -> list[dict]:
    """Per partition: aggregates interleaved at random, each 1..versions in
    order except adjacent swaps; identical redeliveries 1..40 records later.
    Aggregate i lives in partition i % parts. `_p` is the partition."""
    stream_parts = {}
    for p in range(parts):
        aggs = [f"agg-{i:04d}" for i in range(n_aggs) if i % parts == p]
        nextv = {a: 1 for a in aggs}
        live = list(aggs)
        seq = []
        while live:
            a = rng.choice(live)
            seq.append((a, nextv[a]))
            nextv[a] += 1
            if nextv[a] > versions:
                live.remove(a)
        i = 0
        while i < len(seq) - 1:
            if seq[i][0] == seq[i + 1][0] and rng.random() < swap_rate:
                seq[i], seq[i + 1] = seq[i + 1], seq[i]
                i += 2
            else:
                i += 1
        recs = [dict(ce(a, v), _p=p) for a, v in seq]
        stream_parts[p] = with_redeliveries(recs, rng, dup_rate)
    return interleave(stream_parts, rng)


def public(r: dict) -> dict:
    d = {k: v for k, v in r.items() if not k.startswith("_")}
    if "_p" in r:
        d["partition"] = r["_p"]
    return d


class Probe:
    """High watermarks of a topic and a group's committed offsets."""

    def __init__(self, bootstrap: str, group: str):
        self.group = group
        self.consumer = Consumer({"bootstrap.servers": bootstrap,
                                  "group.id": unique_name("sg-probe"),
                                  "enable.auto.commit": False})
        # not an AdminClient: kafkautil.CommittedOffsets says why
        self.offsets = CommittedOffsets(bootstrap, group)

    def high(self, topic: str, parts: int) -> int:
        return sum(self.consumer.get_watermark_offsets(
            TopicPartition(topic, p), timeout=10, cached=False)[1]
            for p in range(parts))

    def committed(self, topic: str, parts: int) -> dict[int, int]:
        return self.offsets.get(topic, parts)

    def close(self):
        self.consumer.close()
        self.offsets.close()


def check_exactly_once(out: list[dict], expected: dict[str, list[int]],
                       what: str) -> None:
    """`out` (read_committed) holds each expected event exactly once, per
    aggregate in version order; `expected` = {aggregate: [versions]}."""
    seen: dict[str, int] = defaultdict(int)
    per_agg: dict[str, list[int]] = defaultdict(list)
    for rec in out:
        h = rec["headers_dict"]
        eid = h["ce_id"].decode()
        seen[eid] += 1
        per_agg[rec["key"].decode()].append(int(h["ce_sequence"]))
    dups = {e: n for e, n in seen.items() if n > 1}
    assert not dups, (f"{what}: {len(dups)} events duplicated in the "
                      f"read_committed output, e.g. {sorted(dups.items())[:5]}")
    want_ids = {f"{a}-v{v}" for a, vs in expected.items() for v in vs}
    missing = want_ids - set(seen)
    assert not missing, (f"{what}: {len(missing)} events missing, e.g. "
                         f"{sorted(missing)[:10]}")
    extra = set(seen) - want_ids
    assert not extra, f"{what}: unexpected events {sorted(extra)[:10]}"
    bad = {a: v for a, v in per_agg.items() if v != expected[a]}
    assert not bad, (f"{what}: {len(bad)} aggregates out of order, e.g. "
                     f"{next(iter(bad.items()))}")


def no_errors(sg: Seqgate, allow: tuple[str, ...] = ()) -> None:
    for run in range(len(sg.runs)):
        errs = [l for l in sg.log_lines(run)
                if l.get("level") == "error" and l.get("event") not in allow]
        assert not errs, f"run {run + 1}: error log lines: {errs[:3]}"


def changelog_of(group: str, topic: str) -> str:
    return f"{group}-{topic}-changelog"


# --------------------------------------------------------------------------
# (a) a clean run


def test_eos_clean_run(bootstrap, seqgate_bin, tmp_path):
    rng = random.Random(4101)
    stream = make_stream(rng, n_aggs=90, versions=20, parts=3,
                         dup_rate=0.1, swap_rate=0.1)
    t_in, t_out, t_dlq = (unique_name("eos-in"), unique_name("eos-out"),
                          unique_name("eos-dlq"))
    group = unique_name("sg-eos")
    create_topics(bootstrap, {t_in: 3, t_out: 3, t_dlq: 1})
    produce(bootstrap, t_in, [public(r) for r in stream], timeout_s=60)
    in_end = end_offsets(bootstrap, t_in)

    conf = make_config(bootstrap=bootstrap, group=group, instance="eos-a",
                       data_dir=str(tmp_path / "data"), input_topic=t_in,
                       output_topic=t_out, dlq_topic=t_dlq,
                       gap_timeout_ms=60000, batch_max_records=200,
                       guarantee="exactly_once")
    sg = Seqgate(seqgate_bin, conf, tmp_path / "run")
    probe = Probe(bootstrap, group)
    try:
        sg.start()
        wait_until(lambda: probe.committed(t_in, 3) == in_end, 90,
                   f"committed offsets {in_end}", 0.25,
                   on_timeout=lambda: "\n" + sg.log_tail())
        time.sleep(1.0)
        assert sg.stop() == 0, sg.log_tail()
    finally:
        sg.cleanup()
        probe.close()

    expected = {f"agg-{i:04d}": list(range(1, 21)) for i in range(90)}
    out = consume_all(bootstrap, t_out, timeout_s=60, expect_count=90 * 20,
                      isolation_level="read_committed")
    check_exactly_once(out, expected, "clean run")
    assert consume_all(bootstrap, t_dlq, timeout_s=20) == []
    no_errors(sg)

    # The changelog: created by seqgate, one partition per input partition,
    # compacted.
    cl = changelog_of(group, t_in)
    assert set(end_offsets(bootstrap, cl)) == {0, 1, 2}
    assert sum(end_offsets(bootstrap, cl).values()) > 0
    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = admin.describe_configs([ConfigResource("topic", cl)])
    cfg = next(iter(res.values())).result(timeout=10)
    assert "compact" in cfg["cleanup.policy"].value, cfg["cleanup.policy"].value
    assert sg.events("changelog_topic_created")
    restored = sg.events("restore_done")
    assert sorted(e["partition"] for e in restored) == [0, 1, 2]
    st = sg.last_stats()
    assert st["transactions_total"] > 0 and st["transactions_aborted_total"] == 0
    # The consumer group's offsets were committed inside the transactions.
    print(f"\neos clean run: {len(stream)} input records, {len(out)} output, "
          f"{st['transactions_total']} transactions, changelog "
          f"{sum(end_offsets(bootstrap, cl).values())} offsets")


# --------------------------------------------------------------------------
# (b) kill -9 mid-stream, twice


def test_eos_kill9_no_duplicates(bootstrap, seqgate_bin, tmp_path):
    rng = random.Random(4102)
    n_aggs, versions = 300, 40
    stream = make_stream(rng, n_aggs=n_aggs, versions=versions, parts=3,
                         dup_rate=0.1, swap_rate=0.05)
    t_in, t_out, t_dlq = (unique_name("eos9-in"), unique_name("eos9-out"),
                          unique_name("eos9-dlq"))
    group = unique_name("sg-eos9")
    create_topics(bootstrap, {t_in: 3, t_out: 3, t_dlq: 1})
    produce(bootstrap, t_in, [public(r) for r in stream], timeout_s=60)
    in_end = end_offsets(bootstrap, t_in)
    n_distinct = n_aggs * versions

    conf = make_config(bootstrap=bootstrap, group=group, instance="eos-k",
                       data_dir=str(tmp_path / "data"), input_topic=t_in,
                       output_topic=t_out, dlq_topic=t_dlq,
                       gap_timeout_ms=60000, batch_max_records=100,
                       guarantee="exactly_once")
    sg = Seqgate(seqgate_bin, conf, tmp_path / "run")
    probe = Probe(bootstrap, group)
    kills_at = []
    try:
        for frac in (0.3, 0.6):
            sg.start()
            # the output's high watermark counts aborted records and
            # transaction markers too: a rough progress gauge only
            wait_until(lambda: probe.high(t_out, 3) >= n_distinct * frac, 120,
                       f"{frac:.0%} of the output", 0.02,
                       on_timeout=lambda: "\n" + sg.log_tail())
            assert sg.running(), "seqgate exited by itself\n" + sg.log_tail()
            sg.kill9()
            kills_at.append(probe.high(t_out, 3))
        assert probe.committed(t_in, 3) != in_end, "killed after the end"
        sg.start()
        wait_until(lambda: probe.committed(t_in, 3) == in_end, 180,
                   f"committed offsets {in_end}", 0.25,
                   on_timeout=lambda: "\n" + sg.log_tail())
        time.sleep(1.0)
        assert sg.stop() == 0, sg.log_tail()
    finally:
        sg.cleanup()
        probe.close()

    expected = {f"agg-{i:04d}": list(range(1, versions + 1))
                for i in range(n_aggs)}
    out = consume_all(bootstrap, t_out, timeout_s=90, expect_count=n_distinct,
                      isolation_level="read_committed")
    check_exactly_once(out, expected, "after 2 x SIGKILL")
    assert consume_all(bootstrap, t_dlq, timeout_s=20) == []
    uncommitted = consume_all(bootstrap, t_out, timeout_s=90,
                              isolation_level="read_uncommitted")
    restored = [e for r in range(len(sg.runs)) for e in sg.events("restore_done", r)]
    print(f"\neos kill -9: {len(stream)} input records, {n_distinct} events, "
          f"output at the kills {kills_at}, read_committed {len(out)} == "
          f"distinct, read_uncommitted {len(uncommitted)} (aborted/unfinished "
          f"transactions), changelog records restored "
          f"{sum(e['records'] for e in restored)} over {len(restored)} "
          f"partition restores")


# --------------------------------------------------------------------------
# (c) the partition moves to an instance with an empty store


def test_eos_partition_moves_to_empty_store(bootstrap, seqgate_bin, tmp_path):
    t_in, t_out, t_dlq = (unique_name("eosmv-in"), unique_name("eosmv-out"),
                          unique_name("eosmv-dlq"))
    group = unique_name("sg-eosmv")
    create_topics(bootstrap, {t_in: 1, t_out: 1, t_dlq: 1})
    aggs = [f"agg-{i:04d}" for i in range(40)]
    # Phase 1: v1, v3, v4 of every aggregate (v3, v4 park behind the gap),
    # and v1..v4 of a control aggregate.
    phase1 = [ce(a, v) for a in aggs for v in (1, 3, 4)]
    phase1 += [ce("ctl", v) for v in (1, 2, 3, 4)]
    produce(bootstrap, t_in, [public(r) for r in phase1])

    def conf(instance, data):
        return make_config(bootstrap=bootstrap, group=group, instance=instance,
                           data_dir=str(tmp_path / data), input_topic=t_in,
                           output_topic=t_out, dlq_topic=t_dlq,
                           gap_timeout_ms=600000, guarantee="exactly_once")

    probe = Probe(bootstrap, group)
    a = Seqgate(seqgate_bin, conf("eos-mv-a", "data-a"), tmp_path / "run-a")
    try:
        a.start()
        end1 = end_offsets(bootstrap, t_in)
        wait_until(lambda: probe.committed(t_in, 1) == end1, 60,
                   "instance A's commit", 0.25,
                   on_timeout=lambda: "\n" + a.log_tail())
        assert a.stop() == 0, a.log_tail()
    finally:
        a.cleanup()
    st_a = a.last_stats()
    assert st_a["parked_events"] == 2 * len(aggs), st_a
    out_a = consume_all(bootstrap, t_out, timeout_s=30,
                        expect_count=len(aggs) + 4)
    assert len(out_a) == len(aggs) + 4  # every v1 and the control's v1..v4

    # Phase 2: redeliveries of A's events, then the gap fillers.
    phase2 = [ce(a_, 1) for a_ in aggs] + [ce("ctl", 3)]
    phase2 += [ce(a_, 3) for a_ in aggs[:10]]  # parked ones redelivered too
    phase2 += [ce(a_, 2) for a_ in aggs]
    produce(bootstrap, t_in, [public(r) for r in phase2])
    end2 = end_offsets(bootstrap, t_in)

    b = Seqgate(seqgate_bin, conf("eos-mv-b", "data-b"), tmp_path / "run-b")
    try:
        b.start()
        wait_until(lambda: probe.committed(t_in, 1) == end2, 60,
                   "instance B's commit", 0.25,
                   on_timeout=lambda: "\n" + b.log_tail())
        time.sleep(1.5)  # a stats line after the last batch
        assert b.stop() == 0, b.log_tail()
    finally:
        b.cleanup()
        probe.close()

    restored = b.events("restore_done")
    assert len(restored) == 1 and restored[0]["records"] > 0, restored
    assert restored[0]["from"] == restored[0]["log_start"], \
        "an empty store must restore the whole changelog"
    expected = {a_: [1, 2, 3, 4] for a_ in aggs}
    expected["ctl"] = [1, 2, 3, 4]
    out = consume_all(bootstrap, t_out, timeout_s=30,
                      expect_count=4 * len(aggs) + 4)
    check_exactly_once(out, expected, "partition moved")
    assert consume_all(bootstrap, t_dlq, timeout_s=20) == []
    st_b = b.last_stats()
    assert st_b["dedup_hits_total"] == len(aggs) + 1 + 10, st_b
    assert st_b["parked_events"] == 0, st_b
    no_errors(a)
    no_errors(b)
    print(f"\neos partition move: B restored {restored[0]['records']} changelog "
          f"records in {restored[0]['ms']} ms; dedup hits "
          f"{st_b['dedup_hits_total']}; drained {2 * len(aggs)} parked events")


# --------------------------------------------------------------------------
# (d) a second instance on one host with the same instance_id is refused


@pytest.mark.serial
def test_eos_same_instance_id_on_one_host(bootstrap, seqgate_bin, tmp_path):
    t_in, t_out, t_dlq = (unique_name("eosz-in"), unique_name("eosz-out"),
                          unique_name("eosz-dlq"))
    group = unique_name("sg-eosz")
    create_topics(bootstrap, {t_in: 3, t_out: 3, t_dlq: 1})
    aggs = [f"agg-{i:04d}" for i in range(30)]

    def conf(data):
        return make_config(bootstrap=bootstrap, group=group, instance="eos-z",
                           data_dir=str(tmp_path / data), input_topic=t_in,
                           output_topic=t_out, dlq_topic=t_dlq,
                           gap_timeout_ms=600000, batch_max_records=50,
                           guarantee="exactly_once")

    def feed(v):
        produce(bootstrap, t_in, [public(dict(ce(a, v), _p=i % 3))
                                  for i, a in enumerate(aggs)])

    probe = Probe(bootstrap, group)
    old = Seqgate(seqgate_bin, conf("data-old"), tmp_path / "run-old")
    new = Seqgate(seqgate_bin, conf("data-new"), tmp_path / "run-new")
    after = Seqgate(seqgate_bin, conf("data-new"), tmp_path / "run-after")
    v = 1
    try:
        old.start()
        feed(v)
        wait_until(lambda: probe.high(t_out, 3) >= len(aggs), 60,
                   "the old instance's output", 0.2,
                   on_timeout=lambda: "\n" + old.log_tail())
        # the second start on this host: refused before it joins the group
        # or initialises transactions (it would fence the old one, and the
        # old one's restart it, forever)
        new.start(wait_assigned=False)
        rc_new = new.wait_exit(60)
        assert rc_new == 2, f"exit status {rc_new}\n{new.log_tail()}"
        assert not new.events("transactions_initialised"), new.log_tail()
        # the old one runs on: more input, all of it committed
        for _ in range(3):
            v += 1
            feed(v)
            time.sleep(0.3)
        end = end_offsets(bootstrap, t_in)
        wait_until(lambda: probe.committed(t_in, 3) == end, 90,
                   "the old instance's commit", 0.25,
                   on_timeout=lambda: "\n" + old.log_tail())
        assert old.running(), old.log_tail()
        assert not old.events("fenced"), old.log_tail()
        # kill -9: the kernel lets go of the claim; a new start passes it,
        # fences the dead one's transactional id and finishes the stream
        old.kill9()
        v += 1
        feed(v)
        after.start()
        end = end_offsets(bootstrap, t_in)
        wait_until(lambda: probe.committed(t_in, 3) == end, 90,
                   "the restarted instance's commit", 0.25,
                   on_timeout=lambda: "\n" + after.log_tail())
        assert after.stop() == 0, after.log_tail()
    finally:
        old.cleanup()
        new.cleanup()
        after.cleanup()
        probe.close()

    exiting = new.events("exiting")
    assert len(exiting) == 1 and exiting[0]["exit_status"] == 2, \
        new.log_tail()
    assert exiting[0]["error"] == "SG_ERR_CONFIG", exiting[0]
    # what a new user with two instances on one instance_id needs: the id,
    # the group, the transactional id, the holder, what to change
    detail = exiting[0]["detail"]
    assert (f'already runs as instance_id "eos-z" in group.id "{group}" '
            f'(transactional.id "{group}-eos-z")') in detail, detail
    assert f"pid {old.proc.pid}" in detail, detail
    assert ("give each instance on a host its own instance_id "
            "(or --instance-id)") in detail, detail
    expected = {a: list(range(1, v + 1)) for a in aggs}
    out = consume_all(bootstrap, t_out, timeout_s=60,
                      expect_count=v * len(aggs))
    check_exactly_once(out, expected, "second instance refused")
    print(f"\neos same instance_id on one host: the second start exited "
          f"{rc_new}; {v} versions x {len(aggs)} aggregates exactly once")


# --------------------------------------------------------------------------
# (e) restore time


def test_eos_restore_time(bootstrap, seqgate_bin, tmp_path):
    n_aggs = 50000  # one event each: a dedup and an aggregate record each
    t_in, t_out, t_dlq = (unique_name("eosrt-in"), unique_name("eosrt-out"),
                          unique_name("eosrt-dlq"))
    group = unique_name("sg-eosrt")
    create_topics(bootstrap, {t_in: 1, t_out: 1, t_dlq: 1})
    produce(bootstrap, t_in, [public(ce(f"agg-{i:06d}", 1))
                              for i in range(n_aggs)], timeout_s=120)
    end = end_offsets(bootstrap, t_in)

    def conf(instance, data):
        return make_config(bootstrap=bootstrap, group=group, instance=instance,
                           data_dir=str(tmp_path / data), input_topic=t_in,
                           output_topic=t_out, dlq_topic=t_dlq,
                           batch_max_records=5000, guarantee="exactly_once")

    probe = Probe(bootstrap, group)
    a = Seqgate(seqgate_bin, conf("eos-rt-a", "data-a"), tmp_path / "run-a")
    b = Seqgate(seqgate_bin, conf("eos-rt-b", "data-b"), tmp_path / "run-b")
    try:
        t0 = time.monotonic()
        a.start()
        wait_until(lambda: probe.committed(t_in, 1) == end, 300,
                   "processing", 0.5, on_timeout=lambda: "\n" + a.log_tail())
        proc_s = time.monotonic() - t0
        assert a.stop() == 0, a.log_tail()
        b.start()          # empty store: the whole changelog
        assert b.stop() == 0, b.log_tail()
        a.start()          # its own store: the delta only (nothing)
        assert a.stop() == 0, a.log_tail()
    finally:
        a.cleanup()
        b.cleanup()
        probe.close()
    cl_records = sum(end_offsets(bootstrap, changelog_of(group, t_in)).values())
    full = b.events("restore_done")[0]
    delta = a.events("restore_done")[0]
    assert full["records"] >= 2 * n_aggs, full
    assert delta["records"] == 0, delta
    st = b.last_stats()
    assert st["restored_records_total"] == full["records"]
    print(f"\neos restore: {n_aggs} events processed in {proc_s:.1f}s; "
          f"changelog {cl_records} offsets; full restore of "
          f"{full['records']} records into an empty store: {full['ms']} ms "
          f"({full['records'] / max(full['ms'], 1) * 1000:.0f} records/s); "
          f"delta restore of the instance that kept its store: "
          f"{delta['records']} records, {delta['ms']} ms")


# --------------------------------------------------------------------------
# (f) failover after a crash to ANOTHER instance (another transactional.id)


def test_eos_kill9_failover_to_other_instance(bootstrap, seqgate_bin, tmp_path):
    """Instance A is killed mid-stream; instance B (another instance_id and
    an empty store) takes over: a transaction A left open is ended by B's
    restore fencing A's transactional id (semantics §6 "Taking over from a
    dead owner"; or, in the rare case the offsets were already sent, by
    the coordinator's abort), B restores the changelog and finishes:
    nothing duplicated, nothing missing."""
    rng = random.Random(4106)
    n_aggs, versions = 120, 30
    stream = make_stream(rng, n_aggs=n_aggs, versions=versions, parts=3,
                         dup_rate=0.1, swap_rate=0.05)
    t_in, t_out, t_dlq = (unique_name("eosfo-in"), unique_name("eosfo-out"),
                          unique_name("eosfo-dlq"))
    group = unique_name("sg-eosfo")
    create_topics(bootstrap, {t_in: 3, t_out: 3, t_dlq: 1})
    produce(bootstrap, t_in, [public(r) for r in stream], timeout_s=60)
    in_end = end_offsets(bootstrap, t_in)

    def conf(instance, data):
        return make_config(bootstrap=bootstrap, group=group, instance=instance,
                           data_dir=str(tmp_path / data), input_topic=t_in,
                           output_topic=t_out, dlq_topic=t_dlq,
                           gap_timeout_ms=60000, batch_max_records=50,
                           guarantee="exactly_once")

    a = Seqgate(seqgate_bin, conf("eos-fo-a", "data-a"), tmp_path / "run-a")
    b = Seqgate(seqgate_bin, conf("eos-fo-b", "data-b"), tmp_path / "run-b")
    probe = Probe(bootstrap, group)
    try:
        a.start()
        wait_until(lambda: probe.high(t_out, 3) >= n_aggs * versions * 0.4,
                   120, "40% of the output", 0.02,
                   on_timeout=lambda: "\n" + a.log_tail())
        a.kill9()
        t0 = time.monotonic()
        b.start(timeout_s=90)
        takeover_s = time.monotonic() - t0
        wait_until(lambda: probe.committed(t_in, 3) == in_end, 120,
                   f"committed offsets {in_end}", 0.25,
                   on_timeout=lambda: "\n" + b.log_tail())
        assert b.stop() == 0, b.log_tail()
    finally:
        a.cleanup()
        b.cleanup()
        probe.close()

    expected = {f"agg-{i:04d}": list(range(1, versions + 1))
                for i in range(n_aggs)}
    out = consume_all(bootstrap, t_out, timeout_s=90,
                      expect_count=n_aggs * versions)
    check_exactly_once(out, expected, "failover after SIGKILL")
    assert consume_all(bootstrap, t_dlq, timeout_s=20) == []
    restored = b.events("restore_done", 0)
    assert sum(e["records"] for e in restored) > 0, restored
    no_errors(b)
    waits = [e["event"] for e in b.log_lines(0)
             if e.get("event") in ("restore_waiting_for_transaction",
                                   "committed_offsets_pending",
                                   "takeover_fenced")]
    print(f"\neos failover: B took over in {takeover_s:.1f}s (waits: "
          f"{sorted(set(waits))}), restored "
          f"{sum(e['records'] for e in restored)} changelog records, "
          f"{len(out)} events exactly once")
