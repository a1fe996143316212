"""Checkpointed store transactions and kill -9 on a real broker (semantics §6
"Checkpoints").

The store keeps one LMDB write transaction open across batches and commits
it at a checkpoint; every batch is in Kafka (the changelog) before that. Here
store.checkpoint_interval_ms is 10 minutes, so no checkpoint is taken by
time (a small store still checkpoints every few batches, when its page
copies would use half its headroom, and when a poll finds nothing). seqgate
is killed (SIGKILL) mid-stream, and again after some progress until a
restart had to restore batches the kill took from the store (its
restore_done lines count the changelog records restored: a kill right
after a checkpoint leaves none), at most 6 times. A third of the aggregates
is held back and produced only when the input ran out before a restart had
restored a tail (or after the kills): the kills never run out of input.
Then:

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
RESERVE_FROM = 200  # aggregates agg-0200.. are held back (_Input)
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
    # aggregates RESERVE_FROM.. are the reserve (_Input)
    first = [r for r in stream if int(r["_agg"][4:]) < RESERVE_FROM]
    placed = produce(bootstrap, t_in, [public(r) for r in first],
                     timeout_s=60)
    conf = make_config(bootstrap=bootstrap, group=group,
                       instance=prefix + "-a", data_dir=str(tmp_path / "data"),
                       input_topic=t_in, output_topic=t_out, dlq_topic=t_dlq,
                       gap_timeout_ms=60000,
                       batch_max_records=BATCH_MAX_RECORDS,
                       guarantee=guarantee)
    # no checkpoint by time in the test's span: the kill lands inside one
    conf["store"] = {"checkpoint_interval_ms": 600000}
    inp = _Input(bootstrap, t_in, stream, first, placed)
    return inp, (t_in, t_out, t_dlq), group, conf


class _Input:
    """The stream, produced in two parts: the aggregates below RESERVE_FROM
    at the start, the rest (the reserve) when reserve() is called."""

    def __init__(self, bootstrap, topic, stream, first, placed):
        self.bootstrap, self.topic, self.stream = bootstrap, topic, stream
        self.records, self.placed = list(first), list(placed)
        self.end = end_offsets(bootstrap, topic)
        self.held = [r for r in stream if int(r["_agg"][4:]) >= RESERVE_FROM]

    def reserve(self) -> bool:
        """Produces the reserve (once); True if it did."""
        if not self.held:
            return False
        self.placed += produce(self.bootstrap, self.topic,
                               [public(r) for r in self.held], timeout_s=60)
        self.records += self.held
        self.held = []
        self.end = end_offsets(self.bootstrap, self.topic)
        return True


def _restored(sg, run=-1):
    return sum(e["records"] for e in sg.events("restore_done", run))


def _kill_restart(sg, probe, inp, t_in, t_out):
    """Killed (SIGKILL) once half the first part's output is there,
    restarted, and killed again after more output until a restart restored
    a changelog tail (at most 6 kills; the reserve is produced if the input
    ran out first); then, the reserve produced, run to the end and stopped
    cleanly; a last run started and stopped. Returns the output's high
    watermarks at the first kill and the records each restart after a kill
    restored."""
    n_first = RESERVE_FROM * VERSIONS

    def out_total():
        return sum(probe.high_parts(t_out, PARTS).values())

    def done():
        return probe.committed(t_in, PARTS) == inp.end

    tail = lambda: "\n" + sg.log_tail()  # noqa: E731
    sg.start()
    wait_until(lambda: out_total() >= n_first // 2, 120,
               "half of the output", 0.02, on_timeout=tail)
    assert sg.running(), "seqgate exited by itself" + tail()
    sg.kill9()
    at_kill = probe.high_parts(t_out, PARTS)
    assert not done(), "killed after the end"
    tails = []
    for _ in range(6):
        sg.start()  # returns once the partitions are restored, assigned
        tails.append(_restored(sg))
        if tails[-1] > 0:
            break
        mark = out_total()
        wait_until(lambda: out_total() >= mark + 200 or done(), 120,
                   "more output", 0.02, on_timeout=tail)
        if done() and not inp.reserve():
            break
        sg.kill9()
    inp.reserve()
    wait_until(done, 180, f"committed offsets {inp.end}", 0.25,
               on_timeout=tail)
    time.sleep(1.0)  # idle batches: nothing more may appear
    assert sg.stop() == 0, sg.log_tail()
    sg.start()
    time.sleep(1.0)
    assert sg.stop() == 0, sg.log_tail()
    # a kill took batches from the store, and a restart brought them back
    assert max(tails) > 0, (f"no restart after a kill restored a changelog "
                            f"tail: {tails}")
    # the last run: the clean stop before it checkpointed everything
    assert _restored(sg) == 0, sg.events("restore_done")
    return at_kill, tails


class _Probe(Probe):
    def high_parts(self, topic: str, parts: int) -> dict[int, int]:
        from confluent_kafka import TopicPartition
        return {p: self.consumer.get_watermark_offsets(
            TopicPartition(topic, p), timeout=10, cached=False)[1]
            for p in range(parts)}


def test_checkpoint_kill9_exactly_once(bootstrap, seqgate_bin, tmp_path):
    inp, (t_in, t_out, t_dlq), group, conf = _setup(
        bootstrap, tmp_path, "exactly_once", "cp9e", 5101)
    sg = Seqgate(seqgate_bin, conf, tmp_path / "run")
    probe = _Probe(bootstrap, group)
    try:
        _at_kill, tails = _kill_restart(sg, probe, inp, t_in, t_out)
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
    no_errors(sg)
    print(f"\ncheckpoint kill -9 (exactly_once): {len(inp.records)} input "
          f"records, {len(out)} output records read_committed; changelog "
          f"records restored after each kill: {tails}")


def test_checkpoint_kill9_at_least_once(bootstrap, seqgate_bin, tmp_path):
    inp, (t_in, t_out, t_dlq), group, conf = _setup(
        bootstrap, tmp_path, "at_least_once", "cp9a", 5102)
    sg = Seqgate(seqgate_bin, conf, tmp_path / "run")
    probe = _Probe(bootstrap, group)
    try:
        at_kill, tails = _kill_restart(sg, probe, inp, t_in, t_out)
    finally:
        sg.cleanup()
        probe.close()
    first_pos: dict[str, tuple[int, int]] = {}
    for r, (p, o) in zip(inp.records, inp.placed):
        first_pos.setdefault(r["_id"], (p, o))
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
    # the batch in flight at each kill (its records, each possibly
    # releasing parked ones)
    assert re_emitted <= 2 * BATCH_MAX_RECORDS * len(tails), \
        f"{re_emitted} re-emitted after {len(tails)} SIGKILLs " \
        f"(> the batches in flight)"
    no_errors(sg)
    print(f"\ncheckpoint kill -9 (at_least_once): {len(inp.records)} input "
          f"records, {len(out)} output records, {re_emitted} re-emitted; "
          f"changelog records restored after each kill: {tails}")
