"""guarantee "at_least_once" with several instances in one consumer group
(semantics §6): a partition's state follows the partition through the
changelog topic, as in exactly_once, but without Kafka transactions.

test_alo_partition_moves_between_running_instances: instance A parks v3 and
  v4 of every aggregate behind a gap; instance B (same group, its own
  data_dir and instance_id) joins while A runs, and the rebalance moves
  partitions from A to B; then the gaps' fillers arrive with redeliveries
  of A's events. Every event reaches the output in version order (the first
  copy of each; at_least_once may write an event twice, never drop one),
  nothing goes to the DLQ, and B restored the partitions it took over from
  the changelog (records > 0).
"""

from __future__ import annotations

import time
from collections import defaultdict

from kafkautil import consume_all, create_topics, end_offsets, produce, unique_name
from seqgate_proc import Seqgate, make_config, wait_until
from test_exactly_once import Probe, ce, public

PARTS = 3


def test_alo_partition_moves_between_running_instances(bootstrap, seqgate_bin,
                                                       tmp_path):
    t_in, t_out, t_dlq = (unique_name("alomv-in"), unique_name("alomv-out"),
                          unique_name("alomv-dlq"))
    group = unique_name("sg-alomv")
    create_topics(bootstrap, {t_in: PARTS, t_out: PARTS, t_dlq: 1})
    aggs = [f"agg-{i:04d}" for i in range(60)]

    def rec(agg: str, v: int) -> dict:
        return dict(public(ce(agg, v)), partition=aggs.index(agg) % PARTS)

    def conf(instance, data):
        c = make_config(bootstrap=bootstrap, group=group, instance=instance,
                        data_dir=str(tmp_path / data), input_topic=t_in,
                        output_topic=t_out, dlq_topic=t_dlq,
                        gap_timeout_ms=600000, guarantee="at_least_once")
        c["kafka_consumer"]["session.timeout.ms"] = "6000"
        c["kafka_consumer"]["heartbeat.interval.ms"] = "1000"
        return c

    # Phase 1, A alone: v1 applied, v3 and v4 parked behind the gap.
    produce(bootstrap, t_in, [rec(a, v) for a in aggs for v in (1, 3, 4)])
    probe = Probe(bootstrap, group)
    a = Seqgate(seqgate_bin, conf("alo-mv-a", "data-a"), tmp_path / "run-a")
    b = Seqgate(seqgate_bin, conf("alo-mv-b", "data-b"), tmp_path / "run-b")
    try:
        a.start()
        end1 = end_offsets(bootstrap, t_in)
        wait_until(lambda: probe.committed(t_in, PARTS) == end1, 60,
                   "instance A's commit", 0.25,
                   on_timeout=lambda: "\n" + a.log_tail())
        assert len(consume_all(bootstrap, t_out, timeout_s=30)) == len(aggs)

        # B joins: the group rebalances and some partitions move to B.
        n_assigned_a = len(a.events("partitions_assigned"))
        b.start()
        wait_until(lambda: len(a.events("partitions_assigned")) > n_assigned_a
                   and b.events("partitions_assigned"), 60,
                   "the rebalance after B joined", 0.25,
                   on_timeout=lambda: "\n" + a.log_tail() + "\n" + b.log_tail())
        b_parts = {p for e in b.events("partitions_assigned")
                   for p in e["partitions"]}
        assert b_parts, "B got no partition"

        # Phase 2: redeliveries of A's events, then the fillers.
        phase2 = [rec(x, 1) for x in aggs] + [rec(x, 3) for x in aggs[:20]]
        phase2 += [rec(x, 2) for x in aggs]
        produce(bootstrap, t_in, phase2)
        end2 = end_offsets(bootstrap, t_in)
        wait_until(lambda: probe.committed(t_in, PARTS) == end2, 90,
                   "the group's commit", 0.25,
                   on_timeout=lambda: "\n" + a.log_tail() + "\n" + b.log_tail())
        time.sleep(1.0)
        assert b.stop() == 0, b.log_tail()
        assert a.stop() == 0, a.log_tail()
    finally:
        a.cleanup()
        b.cleanup()
        probe.close()

    out = consume_all(bootstrap, t_out, timeout_s=30)
    first: dict[str, list[int]] = defaultdict(list)
    seen = set()
    for r in out:
        h = r["headers_dict"]
        eid = h["ce_id"].decode()
        if eid in seen:
            continue  # at_least_once: a copy of an event already written
        seen.add(eid)
        first[r["key"].decode()].append(int(h["ce_sequence"]))
    bad = {x: first.get(x, []) for x in aggs if first.get(x) != [1, 2, 3, 4]}
    assert not bad, (f"{len(bad)} aggregates lost events or order after the "
                     f"partition moved, e.g. {sorted(bad.items())[:3]}")
    dlq = consume_all(bootstrap, t_dlq, timeout_s=20)
    assert dlq == [], f"{len(dlq)} DLQ records, e.g. {dlq[:2]}"
    # B rebuilt the partitions it took over from their changelog.
    restored = [e for e in b.events("restore_done")
                if f"{e['topic']}/{e['partition']}" in b_parts]
    assert restored and all(e["records"] > 0 for e in restored), restored
    print(f"\nat_least_once partition move: B took {sorted(b_parts)}, "
          f"restored {sum(e['records'] for e in restored)} changelog records; "
          f"output {len(out)} records for {len(seen)} events")
