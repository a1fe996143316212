"""Checkpointed store transactions and kill -9 on a real broker (semantics §6
"Checkpoints").

The store keeps one LMDB write transaction open across batches and commits
it at a checkpoint; every batch is in Kafka (the changelog) before that. Here
store.checkpoint_interval_ms is 10 minutes, so between the assignment's
checkpoint and the kill none is taken by time: the kill -9 lands inside one
checkpoint interval and takes every batch since with it. The restart must
restore them from the changelog's tail (its restore_done lines count the
records), then:

test_checkpoint_kill9_exactly_once: the read_committed output holds every
  distinct event exactly once, per aggregate in version order; no DLQ record.
test_checkpoint_kill9_at_least_once: every distinct event is in the output,
  per aggregate in version order once the re-emitted copies (same
  `__seqgate.source`) are removed, and no more is re-emitted than the batch
  in flight: the restored tail knows every batch whose changelog markers were
  acknowledged, which covers every committed input offset.

In both, a last run after a clean stop restores nothing: the stop
checkpointed everything (its revoke and its stop), so the delta restore from
the store's checkpoint applies no record.
"""

from __future__ import annotations

import random
import time
from collections import defaultdict

from kafkautil import consume_all, create_topics, end_offsets, produce, unique_name
from seqgate_proc import Seqgate, make_config, wait_until
from test_exactly_once import (Probe, check_exactly_once, make_stream,
                               no_errors, public)

N_AGGS, VERSIONS, PARTS = 300, 40, 3
BATCH_MAX_RECORDS = 100


def _setup(bootstrap, tmp_path, guarantee, prefix, seed):
    rng = random.Random(seed)
    stream = make_stream(rng, n_aggs=N_AGGS, versions=VERSIONS, parts=PARTS,
                         dup_rate=0.1, swap_rate=0.05)
    t_in, t_out, t_dlq = (unique_name(prefix + "-in"),
                          unique_name(prefix + "-out"),
                          unique_name(prefix + "-dlq"))
    group = unique_name("sg-" + prefix)
    create_topics(bootstrap, {t_in: PARTS, t_out: PARTS, t_dlq: 1})
    placed = produce(bootstrap, t_in, [public(r) for r in stream],
                     timeout_s=60)
    conf = make_config(bootstrap=bootstrap, group=group,
                       instance=prefix + "-a", data_dir=str(tmp_path / "data"),
                       input_topic=t_in, output_topic=t_out, dlq_topic=t_dlq,
                       gap_timeout_ms=60000,
                       batch_max_records=BATCH_MAX_RECORDS,
                       guarantee=guarantee)
    # no checkpoint by time in the test's span: the kill lands inside one
    conf["store"] = {"checkpoint_interval_ms": 600000}
    return stream, placed, (t_in, t_out, t_dlq), group, conf


def _kill_restart(bootstrap, sg, probe, t_in, t_out, in_end):
    """Run 1: killed (SIGKILL) once half the output is there; run 2: to the
    end, stopped cleanly; run 3: started and stopped. Returns the output's
    high watermarks at the kill and after run 2, per partition."""
    n_distinct = N_AGGS * VERSIONS

    def out_total():
        return sum(probe.high_parts(t_out, PARTS).values())

    tail = lambda: "\n" + sg.log_tail()  # noqa: E731
    sg.start()
    wait_until(lambda: out_total() >= n_distinct // 2, 120,
               "half of the output", 0.02, on_timeout=tail)
    assert sg.running(), "seqgate exited by itself" + tail()
    before = sg.last_stats() or {}
    sg.kill9()
    at_kill = probe.high_parts(t_out, PARTS)
    assert probe.committed(t_in, PARTS) != in_end, "killed after the end"
    sg.start()
    wait_until(lambda: probe.committed(t_in, PARTS) == in_end, 180,
               f"committed offsets {in_end}", 0.25, on_timeout=tail)
    time.sleep(1.0)  # idle batches: nothing more may appear
    assert sg.stop() == 0, sg.log_tail()
    at_stop = probe.high_parts(t_out, PARTS)
    sg.start()
    time.sleep(1.0)
    assert sg.stop() == 0, sg.log_tail()
    return before, at_kill, at_stop


def _restored(sg, run):
    return sum(e["records"] for e in sg.events("restore_done", run))


def _check_tail_restored(sg, before):
    # run 1 checkpointed at its assignment, then never by time: what the
    # kill took was restored from the changelog by run 2
    assert before.get("checkpoints_total", 0) <= 2 * PARTS + 2, \
        f"run 1 checkpointed {before.get('checkpoints_total')} times"
    tail = _restored(sg, 1)
    assert tail > 1000, (f"run 2 restored {tail} changelog records: the "
                         f"kill did not land in a checkpoint interval")
    # run 3: the clean stop of run 2 checkpointed everything
    assert _restored(sg, 2) == 0, sg.events("restore_done", 2)
    return tail


class _Probe(Probe):
    def high_parts(self, topic: str, parts: int) -> dict[int, int]:
        from confluent_kafka import TopicPartition
        return {p: self.consumer.get_watermark_offsets(
            TopicPartition(topic, p), timeout=10, cached=False)[1]
            for p in range(parts)}


def test_checkpoint_kill9_exactly_once(bootstrap, seqgate_bin, tmp_path):
    stream, _placed, (t_in, t_out, t_dlq), group, conf = _setup(
        bootstrap, tmp_path, "exactly_once", "cp9e", 5101)
    in_end = end_offsets(bootstrap, t_in)
    sg = Seqgate(seqgate_bin, conf, tmp_path / "run")
    probe = _Probe(bootstrap, group)
    try:
        before, _at_kill, _at_stop = _kill_restart(bootstrap, sg, probe, t_in,
                                                   t_out, in_end)
    finally:
        sg.cleanup()
        probe.close()
    expected = {f"agg-{i:04d}": list(range(1, VERSIONS + 1))
                for i in range(N_AGGS)}
    out = consume_all(bootstrap, t_out, timeout_s=90,
                      expect_count=N_AGGS * VERSIONS,
                      isolation_level="read_committed")
    check_exactly_once(out, expected, "SIGKILL inside a checkpoint interval")
    assert consume_all(bootstrap, t_dlq, timeout_s=20) == []
    tail = _check_tail_restored(sg, before)
    no_errors(sg)
    print(f"\ncheckpoint kill -9 (exactly_once): {len(stream)} input "
          f"records, {len(out)} output records read_committed, "
          f"{before.get('checkpoints_total')} checkpoints before the kill, "
          f"{tail} changelog records restored after it")


def test_checkpoint_kill9_at_least_once(bootstrap, seqgate_bin, tmp_path):
    stream, placed, (t_in, t_out, t_dlq), group, conf = _setup(
        bootstrap, tmp_path, "at_least_once", "cp9a", 5102)
    first_pos: dict[str, tuple[int, int]] = {}
    for r, (p, o) in zip(stream, placed):
        first_pos.setdefault(r["_id"], (p, o))
    in_end = end_offsets(bootstrap, t_in)
    sg = Seqgate(seqgate_bin, conf, tmp_path / "run")
    probe = _Probe(bootstrap, group)
    try:
        before, at_kill, _at_stop = _kill_restart(bootstrap, sg, probe, t_in,
                                                  t_out, in_end)
    finally:
        sg.cleanup()
        probe.close()
    out = consume_all(bootstrap, t_out, timeout_s=90,
                      expect_count=N_AGGS * VERSIONS)
    assert consume_all(bootstrap, t_dlq, timeout_s=20) == []
    seen: dict[str, dict] = {}
    re_emitted = 0
    per_agg: dict[str, list[int]] = defaultdict(list)
    for rec in out:  # (partition, offset) order
        h = rec["headers_dict"]
        src = h["__seqgate.source"].decode()
        if src in seen:
            assert rec["offset"] >= at_kill[rec["partition"]], \
                f"{src} emitted twice before the kill"
            re_emitted += 1
            continue
        seen[src] = rec
        eid = h["ce_id"].decode()
        p, o = first_pos[eid]
        assert src == f"{t_in}/{p}/{o}", f"{eid} traced to {src}"
        per_agg[rec["key"].decode()].append(int(h["ce_sequence"]))
    missing = set(first_pos) - {r["headers_dict"]["ce_id"].decode()
                                for r in out}
    assert not missing, f"{len(missing)} events lost, e.g. {sorted(missing)[:10]}"
    bad = {a: v for a, v in per_agg.items()
           if v != list(range(1, VERSIONS + 1))}
    assert not bad, f"{len(bad)} aggregates out of order, e.g. {next(iter(bad.items()))}"
    # the batch in flight (its records, each possibly releasing parked ones)
    assert re_emitted <= 2 * BATCH_MAX_RECORDS, \
        f"{re_emitted} re-emitted after SIGKILL (> the batch in flight)"
    tail = _check_tail_restored(sg, before)
    no_errors(sg)
    print(f"\ncheckpoint kill -9 (at_least_once): {len(stream)} input "
          f"records, {len(out)} output records, {re_emitted} re-emitted, "
          f"{before.get('checkpoints_total')} checkpoints before the kill, "
          f"{tail} changelog records restored after it")
