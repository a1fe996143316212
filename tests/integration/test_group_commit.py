"""at_least_once commits its input offsets at most every commit_interval_ms,
and always when its partitions are revoked and at a clean stop (semantics §6,
"Durability of the store"; docs/guarantees.md "Group commit of input offsets").

A group offset behind loses nothing: a partition starts at the later of the
group's committed offset and the offset the (restored) store reflects, so a
restart after a kill reads again only what the store knows — duplicates.

- test_offsets_wait_for_interval_then_clean_stop: with a long interval every
  record is judged and its output delivered while the group's committed
  offsets stay behind; a clean stop (SIGTERM) commits them: they equal the
  end offsets. (Committing every batch, they would equal them at once.)
- test_offsets_committed_within_interval: with a short interval the offsets
  reach the end offsets while seqgate keeps running.
- test_store_offset_ahead_is_committed: killed (SIGKILL) while its offsets
  are behind, and restarted on its own store with nothing new to read, the
  partitions start at the offset the restored store reflects; that offset
  is durable (every batch below it is complete in the changelog), so the
  group commits it: after a clean stop the group's offsets equal the end
  offsets. (Were only the offsets of batches committed, a partition with
  no new record would keep its group offset, and its consumer lag, behind
  for good.)
- test_kill_rereads_only_duplicates: killed (SIGKILL) while its offsets are
  behind, and restarted on an empty data_dir (as a new owner: its store
  restored from the changelog), seqgate emits every distinct event exactly
  once and dead-letters nothing, over the first half, its redeliveries and a
  second half.
"""

from __future__ import annotations

import time

from kafkautil import consume_all, create_topics, end_offsets, produce, unique_name
from seqgate_proc import Seqgate, make_config, wait_until
from test_restart import Probe
from test_store_durability import record

N_AGGREGATES = 30
VERSIONS = 8
PARTS = 2


def versions(first_v: int, n: int = VERSIONS) -> list[dict]:
    return [record(f"agg-{i:02d}", v, i % PARTS)
            for v in range(first_v, first_v + n)
            for i in range(N_AGGREGATES)]


class Setup:
    def __init__(self, bootstrap, tmp_path, prefix, interval_ms):
        self.bootstrap = bootstrap
        self.t_in, self.t_out, self.t_dlq = (unique_name(f"{prefix}-in"),
                                             unique_name(f"{prefix}-out"),
                                             unique_name(f"{prefix}-dlq"))
        self.group = unique_name(f"sg-{prefix}")
        create_topics(bootstrap, {self.t_in: PARTS, self.t_out: PARTS,
                                  self.t_dlq: 1})
        self.tmp = tmp_path
        self.interval_ms = interval_ms
        self.probe = Probe(bootstrap, self.group)

    def seqgate(self, binary, name) -> Seqgate:
        conf = make_config(bootstrap=self.bootstrap, group=self.group,
                           instance=name, data_dir=str(self.tmp / name),
                           input_topic=self.t_in, output_topic=self.t_out,
                           dlq_topic=self.t_dlq, gap_timeout_ms=60000,
                           guarantee="at_least_once", batch_max_records=20)
        conf["commit_interval_ms"] = self.interval_ms
        return Seqgate(binary, conf, self.tmp / f"run-{name}")

    def outputs(self) -> int:
        return sum(self.probe.high(self.t_out, PARTS).values())

    def run_until_output(self, sg: Seqgate, recs: list[dict], n: int,
                         **start) -> dict[int, int]:
        """Produces @recs, starts @sg and waits until the output topic holds
        @n records; returns the input's end offsets."""
        produce(self.bootstrap, self.t_in, recs, timeout_s=60)
        end = end_offsets(self.bootstrap, self.t_in)
        sg.start(**start)
        wait_until(lambda: self.outputs() == n, 120, f"{n} output records",
                   0.25, on_timeout=lambda: "\n" + sg.log_tail())
        return end

    def wait_batches_committed(self, sg: Seqgate, n: int) -> None:
        """Waits until @sg's stats line counts @n records in committed
        batches (records_in_total: a batch's changelog markers were
        acknowledged and its LMDB transaction ended). Output visible in the
        output topic is not enough before a kill: at_least_once writes a
        batch's end marker after its output, and a kill between the two
        leaves the batch void in the changelog, to be judged again
        (semantics §6) — right, but not what these tests are about."""
        wait_until(lambda: (sg.last_stats() or {}).get("records_in_total",
                                                       0) >= n,
                   60, f"{n} records in committed batches", 0.1,
                   on_timeout=lambda: "\n" + sg.log_tail())

    def committed(self) -> dict[int, int]:
        return self.probe.committed(self.t_in, PARTS)

    def check_output_once(self, n: int) -> None:
        out = consume_all(self.bootstrap, self.t_out, timeout_s=60,
                          expect_count=n)
        ids = [o["headers_dict"].get("ce_id") for o in out]
        assert len(ids) == n and len(set(ids)) == n, \
            f"{len(ids)} outputs, {len(set(ids))} distinct; want {n} once each"
        assert consume_all(self.bootstrap, self.t_dlq, timeout_s=20) == []


def test_offsets_wait_for_interval_then_clean_stop(bootstrap, seqgate_bin,
                                                   tmp_path):
    s = Setup(bootstrap, tmp_path, "gc-stop", 600000)
    sg = s.seqgate(seqgate_bin, "a")
    recs = versions(1)
    try:
        end = s.run_until_output(sg, recs, len(recs))
        time.sleep(2)  # many batches' worth of time
        behind = s.committed()
        assert behind != end, \
            f"offsets committed before the interval: {behind} == {end}"
        rc = sg.stop()
        assert rc == 0, f"exit status {rc}\n{sg.log_tail()}"
        assert s.committed() == end, \
            f"after a clean stop: {s.committed()}, want {end}"
    finally:
        sg.cleanup()
        s.probe.close()
    s.check_output_once(len(recs))


def test_offsets_committed_within_interval(bootstrap, seqgate_bin, tmp_path):
    s = Setup(bootstrap, tmp_path, "gc-interval", 500)
    sg = s.seqgate(seqgate_bin, "a")
    recs = versions(1)
    try:
        end = s.run_until_output(sg, recs, len(recs))
        # the last batch's offsets wait at most the interval (0.5 s), plus
        # one idle batch; 10 s leaves room for a loaded machine
        wait_until(lambda: s.committed() == end, 10,
                   f"committed offsets {end} while running", 0.1,
                   on_timeout=lambda: f" (at {s.committed()})\n"
                   + sg.log_tail())
        assert sg.running()
        rc = sg.stop()
        assert rc == 0, f"exit status {rc}\n{sg.log_tail()}"
    finally:
        sg.cleanup()
        s.probe.close()
    s.check_output_once(len(recs))


def test_store_offset_ahead_is_committed(bootstrap, seqgate_bin, tmp_path):
    s = Setup(bootstrap, tmp_path, "gc-ahead", 600000)
    sg = s.seqgate(seqgate_bin, "a")
    recs = versions(1)
    try:
        end = s.run_until_output(sg, recs, len(recs))
        s.wait_batches_committed(sg, len(recs))
        sg.kill9()
        behind = s.committed()
        assert behind != end, f"nothing behind: {behind}"
        sg.start()  # the same store, nothing new to read
        time.sleep(2)
        rc = sg.stop()
        assert rc == 0, f"exit status {rc}\n{sg.log_tail()}"
        assert s.committed() == end, \
            f"after the restart's clean stop: {s.committed()}, want {end}"
        assigned = sg.events("partitions_assigned")
        assert assigned and sorted(assigned[0]["start_offsets"]) == \
            sorted(end.values()), assigned
    finally:
        sg.cleanup()
        s.probe.close()
    s.check_output_once(len(recs))


def test_kill_rereads_only_duplicates(bootstrap, seqgate_bin, tmp_path):
    s = Setup(bootstrap, tmp_path, "gc-kill", 600000)
    sg1 = s.seqgate(seqgate_bin, "a")
    sg2 = s.seqgate(seqgate_bin, "b")  # a new owner: empty data_dir
    first = versions(1)
    try:
        end1 = s.run_until_output(sg1, first, len(first))
        s.wait_batches_committed(sg1, len(first))
        sg1.kill9()
        behind = s.committed()
        assert behind != end1, f"nothing left to re-read: {behind}"
        # every event again (redeliveries), then the next versions
        end2 = s.run_until_output(sg2, first + versions(VERSIONS + 1),
                                  2 * len(first), timeout_s=60)
        rc = sg2.stop()
        assert rc == 0, f"exit status {rc}\n{sg2.log_tail()}"
        assert s.committed() == end2
        stats = sg2.last_stats()
        assert stats and stats.get("dedup_hits_total", 0) >= len(first), \
            f"the redeliveries are duplicates: {stats}"
    finally:
        sg1.cleanup()
        sg2.cleanup()
        s.probe.close()
    s.check_output_once(2 * len(first))
