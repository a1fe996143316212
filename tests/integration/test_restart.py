"""Nothing lost across restarts, and a store refuses a foreign consumer group.

test_restart_nothing_lost: a seeded stream of CloudEvents (binary mode) over
300 aggregates in 3 partitions, with identical redeliveries and locally
swapped adjacent versions, no gap that can time out. seqgate runs on it,
is stopped with SIGTERM once output appears, restarted, killed with SIGKILL
while busy, restarted, and let finish (the consumer group's committed offsets
reach the input's end offsets). Then (semantics §3, §6):
  - every distinct event is in the output exactly once, traced to the first
    input record carrying its idempotency key; the DLQ is empty;
  - per aggregate, once the copies re-emitted after the crash are removed
    (same `__seqgate.source`), versions are 1..N in order, no gap;
  - the clean stop re-emitted nothing; the crash re-emitted at most the
    batch in flight.

test_foreign_consumer_group: a data_dir written for consumer group A is
refused by a run with group B: exit status 1 and a log line naming both.
"""

from __future__ import annotations

import json
import random
import time
from collections import defaultdict

from confluent_kafka import Consumer, TopicPartition

from kafkautil import (CommittedOffsets, consume_all, create_topics, end_offsets,
                       produce, unique_name)
from seqgate_proc import (Seqgate, interleave, make_config, wait_until,
                          with_redeliveries)

SOURCE = "urn:example:restart"
N_AGGREGATES = 300
VERSIONS_PER_AGGREGATE = 60     # 18,000 distinct events
DUP_RATE = 0.10                 # identical redeliveries
SWAP_RATE = 0.05                # v+1 before v
BATCH_MAX_RECORDS = 100         # many batches: the SIGKILL lands mid-stream
SEED = 20240611


def make_stream(rng: random.Random) -> list[dict]:
    """Input records in produce order; `_id`, `_agg`, `_v` are test-only."""
    parts: dict[int, list[tuple[str, int]]] = defaultdict(list)
    for p in range(3):
        aggs = [f"agg-{i:03d}" for i in range(N_AGGREGATES) if i % 3 == p]
        nextv = {a: 1 for a in aggs}
        live = list(aggs)
        while live:
            a = rng.choice(live)
            parts[p].append((a, nextv[a]))
            nextv[a] += 1
            if nextv[a] > VERSIONS_PER_AGGREGATE:
                live.remove(a)
        # Swap adjacent versions of one aggregate (positions of v and v+1).
        pos_by_agg = defaultdict(list)
        for i, (a, _v) in enumerate(parts[p]):
            pos_by_agg[a].append(i)
        seq = parts[p]
        for a in sorted(pos_by_agg):
            positions = pos_by_agg[a]
            k = 0
            while k < len(positions) - 1:
                if rng.random() < SWAP_RATE:
                    i, j = positions[k], positions[k + 1]
                    seq[i], seq[j] = seq[j], seq[i]
                    k += 2
                else:
                    k += 1

    def record(p, a, v):
        eid = f"{a}-v{v}"
        value = json.dumps({"aggregate": a, "version": v,
                            "data": "x" * (v % 17)}).encode()
        return {"key": a.encode(), "value": value, "partition": p,
                "headers": [("ce_specversion", b"1.0"), ("ce_id", eid.encode()),
                            ("ce_source", SOURCE.encode()),
                            ("ce_type", b"thing.updated"),
                            ("ce_sequence", str(v).encode())],
                "_id": eid, "_agg": a, "_v": v}

    per_part: dict[int, list[dict]] = {}
    for p in range(3):
        recs = [record(p, a, v) for a, v in parts[p]]
        # Redeliveries: an identical copy 1..40 records later.
        per_part[p] = with_redeliveries(recs, rng, DUP_RATE)
    # Interleave the partitions, keeping each partition's order.
    return interleave(per_part, rng)


def _public(r: dict) -> dict:
    return {k: v for k, v in r.items() if not k.startswith("_")}


class Probe:
    """Watermarks of the output topic and the group's committed offsets."""

    def __init__(self, bootstrap: str, group: str):
        self.group = group
        self.consumer = Consumer({"bootstrap.servers": bootstrap,
                                  "group.id": unique_name("sg-probe"),
                                  "enable.auto.commit": False})
        # not an AdminClient: kafkautil.CommittedOffsets says why
        self.offsets = CommittedOffsets(bootstrap, group)

    def high(self, topic: str, parts: int) -> dict[int, int]:
        return {p: self.consumer.get_watermark_offsets(
            TopicPartition(topic, p), timeout=10, cached=False)[1]
            for p in range(parts)}

    def committed(self, topic: str, parts: int) -> dict[int, int]:
        return self.offsets.get(topic, parts)

    def close(self):
        self.consumer.close()
        self.offsets.close()


def test_restart_nothing_lost(bootstrap, seqgate_bin, tmp_path):
    rng = random.Random(SEED)
    stream = make_stream(rng)
    t_in, t_out, t_dlq = (unique_name("restart-in"), unique_name("restart-out"),
                          unique_name("restart-dlq"))
    group = unique_name("sg-restart")
    create_topics(bootstrap, {t_in: 3, t_out: 3, t_dlq: 1})

    placed = produce(bootstrap, t_in, [_public(r) for r in stream], timeout_s=60)
    first_pos: dict[str, tuple[int, int]] = {}
    for r, (p, o) in zip(stream, placed):
        assert p == r["partition"]
        first_pos.setdefault(r["_id"], (p, o))
    n_distinct = len(first_pos)
    n_records = len(stream)
    in_end = end_offsets(bootstrap, t_in)
    assert sum(in_end.values()) == n_records

    conf = make_config(bootstrap=bootstrap, group=group, instance="seqgate-restart",
                       data_dir=str(tmp_path / "data"), input_topic=t_in,
                       output_topic=t_out, dlq_topic=t_dlq,
                       gap_timeout_ms=60000, state_machine=None,
                       batch_max_records=BATCH_MAX_RECORDS, batch_max_ms=100,
                       stats_interval_ms=1000)
    sg = Seqgate(seqgate_bin, conf, tmp_path / "run")
    probe = Probe(bootstrap, group)
    t0 = time.monotonic()

    def out_total():
        return sum(probe.high(t_out, 3).values())

    def tail():
        return "\nseqgate log tail:\n" + sg.log_tail()

    try:
        # Run 1: stop cleanly once output appears.
        sg.start()
        wait_until(lambda: out_total() >= 500, 60, "first output", 0.02,
                   on_timeout=tail)
        rc = sg.stop()
        assert rc == 0, f"SIGTERM exit status {rc}{tail()}"
        mark1 = probe.high(t_out, 3)

        # Run 2: crash (SIGKILL) while busy, around half the output.
        sg.start()
        wait_until(lambda: out_total() >= n_distinct // 2, 90,
                   "half of the output", 0.02, on_timeout=tail)
        assert sg.running(), "seqgate exited by itself" + tail()
        sg.kill9()
        mark2 = probe.high(t_out, 3)
        at_kill = sum(mark2.values())
        assert at_kill < n_distinct, \
            f"SIGKILL landed after all output ({at_kill}); not mid-stream"

        # Run 3: let it finish: committed offsets reach the end offsets.
        sg.start()
        wait_until(lambda: probe.committed(t_in, 3) == in_end, 120,
                   f"committed offsets {in_end}", 0.25,
                   on_timeout=lambda: f" (committed {probe.committed(t_in, 3)})"
                   + tail())
        time.sleep(1.0)  # a few idle batches: nothing more may appear
        rc = sg.stop()
        assert rc == 0, f"SIGTERM exit status {rc}{tail()}"
    finally:
        sg.cleanup()
        probe.close()
    elapsed = time.monotonic() - t0

    out = consume_all(bootstrap, t_out, timeout_s=60, expect_count=n_distinct)
    dlq = consume_all(bootstrap, t_dlq, timeout_s=30)
    assert dlq == [], (f"{len(dlq)} DLQ records, e.g. "
                       f"{[(d['headers_dict'].get('ce_id'), d['headers_dict'].get('__seqgate.errors.reason'), d['headers_dict'].get('__seqgate.errors.detail')) for d in dlq[:5]]}")

    for run in range(len(sg.runs)):
        aborted = sg.events("batch_aborted", run)
        assert not aborted, f"run {run + 1}: aborted batches: {aborted[:3]}"
        fatal = [l for l in sg.log_lines(run) if l.get("level") == "error"]
        assert not fatal, f"run {run + 1}: error log lines: {fatal[:3]}"

    # Segments of the output topic written by each run.
    def segment(rec):
        if rec["offset"] < mark1[rec["partition"]]:
            return 1
        if rec["offset"] < mark2[rec["partition"]]:
            return 2
        return 3

    seen_src: dict[str, dict] = {}
    redelivered = {1: 0, 2: 0, 3: 0}
    per_agg: dict[str, list[int]] = defaultdict(list)
    for rec in out:  # (partition, offset) order
        h = rec["headers_dict"]
        src = h.get("__seqgate.source", b"").decode()
        eid = h["ce_id"].decode()
        if src in seen_src:
            prev = seen_src[src]
            assert (prev["key"], prev["value"], prev["headers"]) == \
                (rec["key"], rec["value"], rec["headers"]), \
                f"two different output records claim source {src}"
            assert segment(rec) > segment(prev), \
                f"{eid} emitted twice by the same run (segment {segment(rec)})"
            redelivered[segment(rec)] += 1
            continue
        seen_src[src] = rec
        want_p, want_o = first_pos[eid]
        assert src == f"{t_in}/{want_p}/{want_o}", \
            f"{eid}: output traced to {src}, first input copy is {want_p}/{want_o}"
        assert rec["partition"] == want_p
        agg = rec["key"].decode()
        assert eid.startswith(agg + "-v")
        per_agg[agg].append(int(h["ce_sequence"]))

    ids_out = {r["headers_dict"]["ce_id"].decode() for r in out}
    missing = set(first_pos) - ids_out
    assert not missing, f"{len(missing)} events lost, e.g. {sorted(missing)[:10]}"
    assert len(seen_src) == n_distinct, \
        f"{len(seen_src)} distinct output sources for {n_distinct} events"
    bad = {a: v for a, v in per_agg.items()
           if v != list(range(1, VERSIONS_PER_AGGREGATE + 1))}
    assert not bad, (f"{len(bad)} aggregates out of order or with gaps, e.g. "
                     f"{next(iter(bad.items()))}")
    assert len(per_agg) == N_AGGREGATES

    # Clean stop: nothing re-emitted. Crash: at most the batch in flight
    # (its records, each possibly releasing parked ones: < 2 per record).
    assert redelivered[2] == 0, f"{redelivered[2]} re-emitted after SIGTERM"
    assert redelivered[3] <= 2 * BATCH_MAX_RECORDS, \
        f"{redelivered[3]} re-emitted after SIGKILL (> batch in flight)"

    stats3 = sg.last_stats()
    print(f"\nrestart: {n_records} input records, {n_distinct} distinct events, "
          f"{len(out)} output records, {redelivered[3]} re-emitted after SIGKILL "
          f"(output at kill {at_kill}), run-3 stats applied "
          f"{stats3 and stats3.get('applied_total')} dedup "
          f"{stats3 and stats3.get('dedup_hits_total')}, {elapsed:.1f}s")


def test_foreign_consumer_group(bootstrap, seqgate_bin, tmp_path):
    t_in, t_out, t_dlq = (unique_name("foreign-in"), unique_name("foreign-out"),
                          unique_name("foreign-dlq"))
    group_a, group_b = unique_name("sg-group-a"), unique_name("sg-group-b")
    create_topics(bootstrap, {t_in: 1, t_out: 1, t_dlq: 1})
    produce(bootstrap, t_in, [
        {"key": "agg-1", "value": f'{{"v":{v}}}',
         "headers": [("ce_specversion", b"1.0"), ("ce_id", f"e{v}".encode()),
                     ("ce_source", SOURCE.encode()), ("ce_type", b"thing.updated"),
                     ("ce_sequence", str(v).encode())]}
        for v in range(1, 6)])
    data_dir = str(tmp_path / "data")

    def conf(group):
        return make_config(bootstrap=bootstrap, group=group, instance="seqgate-f",
                           data_dir=data_dir, input_topic=t_in,
                           output_topic=t_out, dlq_topic=t_dlq)

    a = Seqgate(seqgate_bin, conf(group_a), tmp_path / "run-a")
    try:
        a.start()
        wait_until(lambda: sum(end_offsets(bootstrap, t_out).values()) >= 5, 30,
                   "group A's output", on_timeout=lambda: a.log_tail())
        rc = a.stop()
        assert rc == 0, a.log_tail()
    finally:
        a.cleanup()

    b = Seqgate(seqgate_bin, conf(group_b), tmp_path / "run-b")
    try:
        b.start(wait_assigned=False)
        rc = b.wait_exit(60)
    finally:
        b.cleanup()
    assert rc == 2, f"group B on group A's data_dir: exit {rc}\n{b.log_tail()}"
    exiting = b.events("exiting")
    assert exiting and exiting[-1]["error"] == "SG_ERR_FOREIGN", b.log_tail()
    assert exiting[-1]["error_text"] and exiting[-1]["exit_status"] == 2
    naming = [l for l in b.log_text().splitlines()
              if group_a in l and group_b in l]
    assert naming, f"no log line names both groups:\n{b.log_tail()}"
    assert any(json.loads(l).get("level") == "error" for l in naming)
    # Group B processed nothing.
    assert sum(end_offsets(bootstrap, t_out).values()) == 5
