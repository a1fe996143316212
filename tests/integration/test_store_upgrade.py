"""The upgrade from store format 2 (docs/upgrade.md "Store format 3" and
"Rolling upgrade"), on the real broker, with a seqgate of store format 2
beside this one in one consumer group (exactly_once).

Needs the earlier version's binary: $SEQGATE_OLD_BIN, a seqgate built from
a commit before store format 3; tests/run.sh builds one from the
repository's history (OLD_FORMAT2_COMMIT) and sets it. Skipped without it
(a shallow clone).

test_rolling_upgrade_in_two_steps: instances A and B of one group, 4
partitions, every restart a rebalance that moves partitions between them:
  both old → B new with store.upgrade_from 2 (its format 2 store set
  aside, restored from the changelog) → A old again (it restores
  partitions B wrote: format 2 records) → A new with upgrade_from 2 →
  step 2: B, then A, without upgrade_from (format 3 records) → a third
  instance C alone with an empty data_dir restores the whole mixed
  changelog. Events are produced between the steps, with gaps that park
  versions across them. Then:
  - every event is in the output exactly once, per aggregate in version
    order, and the DLQ is empty;
  - no instance logged an error (the old one restored what a step 1
    instance wrote);
  - every parked event's changelog key, of either format, ends with a
    tombstone: an event parked under a format 2 key and released under
    format 3 left no record a restore would park again.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict

import pytest

from kafkautil import consume_all, create_topics, end_offsets, produce, unique_name
from seqgate_proc import Seqgate, make_config, wait_until
from test_exactly_once import (Probe, ce, changelog_of, check_exactly_once,
                               no_errors, public)

SG_DB_PARKED = 3
PARTS = 4
N_AGGS = 24


@pytest.fixture(scope="module")
def old_bin() -> str:
    path = os.environ.get("SEQGATE_OLD_BIN")
    if not path:
        pytest.skip("SEQGATE_OLD_BIN (a seqgate of store format 2) not set")
    assert os.access(path, os.X_OK), path
    return path


def run_with(sg: Seqgate, binary: str, upgrade_from: int | None) -> None:
    """The next start of `sg` runs `binary`, with store.upgrade_from set
    (or absent: the old binary does not know the key)."""
    sg.binary = binary
    store = sg.config.setdefault("store", {})
    store.pop("upgrade_from", None)
    if upgrade_from is not None:
        store["upgrade_from"] = upgrade_from
    sg.config_path.write_text(json.dumps(sg.config, indent=2))


def test_rolling_upgrade_in_two_steps(bootstrap, seqgate_bin, old_bin,
                                      tmp_path):
    t_in, t_out, t_dlq = (unique_name("upg-in"), unique_name("upg-out"),
                          unique_name("upg-dlq"))
    group = unique_name("sg-upg")
    create_topics(bootstrap, {t_in: PARTS, t_out: PARTS, t_dlq: 1})
    aggs = [f"agg-{i:04d}" for i in range(N_AGGS)]
    nextv = {a: 1 for a in aggs}
    held: dict[str, dict] = {}  # a version held back: parked across a step
    expected: dict[str, list[int]] = defaultdict(list)

    def phase(k: int) -> None:
        """Two versions of every aggregate; a third of them hold v back and
        send v+1 now (parked), the held one comes in the next phase."""
        recs = []
        for i, a in enumerate(aggs):
            if a in held:
                recs.append(held.pop(a))
            for _ in range(2):
                v = nextv[a]
                nextv[a] += 1
                expected[a].append(v)
                r = dict(ce(a, v), _p=i % PARTS)
                if (i + k) % 3 == 0 and a not in held and _ == 0:
                    held[a] = r
                else:
                    recs.append(r)
        produce(bootstrap, t_in, [public(r) for r in recs], timeout_s=60)

    def flush_held() -> None:
        recs = list(held.values())
        held.clear()
        produce(bootstrap, t_in, [public(r) for r in recs], timeout_s=60)

    def conf(instance, data):
        return make_config(bootstrap=bootstrap, group=group, instance=instance,
                           data_dir=str(tmp_path / data), input_topic=t_in,
                           output_topic=t_out, dlq_topic=t_dlq,
                           gap_timeout_ms=600000, batch_max_records=20,
                           guarantee="exactly_once")

    probe = Probe(bootstrap, group)
    a = Seqgate(old_bin, conf("upg-a", "data-a"), tmp_path / "run-a")
    b = Seqgate(old_bin, conf("upg-b", "data-b"), tmp_path / "run-b")
    c = Seqgate(seqgate_bin, conf("upg-c", "data-c"), tmp_path / "run-c")

    def caught_up(*who: Seqgate) -> None:
        end = end_offsets(bootstrap, t_in)
        wait_until(lambda: probe.committed(t_in, PARTS) == end, 180,
                   f"committed offsets {end}", 0.25,
                   on_timeout=lambda: "".join(
                       "\n" + s.log_tail() for s in who if s.runs))

    try:
        # both old
        a.start(timeout_s=90)
        b.start(timeout_s=90)
        phase(0)
        caught_up(a, b)
        # step 1: B new, writing format 2's records
        assert b.stop(60) == 0, b.log_tail()
        run_with(b, seqgate_bin, 2)
        b.start(timeout_s=120)
        rebuilt = b.events("store_rebuilt")
        assert rebuilt and "store format 2" in rebuilt[0]["reason"], \
            b.log_tail()
        phase(1)
        caught_up(a, b)
        # A old again: it restores what B wrote
        assert a.stop(60) == 0, a.log_tail()
        phase(2)
        caught_up(b)
        a.start(timeout_s=120)
        phase(3)
        caught_up(a, b)
        # A new, step 1
        assert a.stop(60) == 0, a.log_tail()
        run_with(a, seqgate_bin, 2)
        a.start(timeout_s=120)
        phase(4)
        caught_up(a, b)
        # step 2: B, then A, without upgrade_from
        assert b.stop(60) == 0, b.log_tail()
        run_with(b, seqgate_bin, None)
        b.start(timeout_s=120)
        phase(5)
        caught_up(a, b)
        assert a.stop(60) == 0, a.log_tail()
        run_with(a, seqgate_bin, None)
        a.start(timeout_s=120)
        phase(6)
        flush_held()
        caught_up(a, b)
        assert a.stop(60) == 0, a.log_tail()
        assert b.stop(60) == 0, b.log_tail()
        # a new instance restores the mixed changelog alone
        c.start(timeout_s=180)
        phase(7)
        flush_held()
        caught_up(c)
        assert c.stop(60) == 0, c.log_tail()
    finally:
        a.cleanup()
        b.cleanup()
        c.cleanup()
        probe.close()

    total = sum(len(v) for v in expected.values())
    out = consume_all(bootstrap, t_out, timeout_s=90, expect_count=total)
    check_exactly_once(out, expected, "rolling upgrade")
    assert consume_all(bootstrap, t_dlq, timeout_s=20) == []
    for s in (a, b, c):
        no_errors(s)
    # every parked event's key, of either format, ends with a tombstone
    last: dict[bytes, bool] = {}
    for r in consume_all(bootstrap, changelog_of(group, t_in), timeout_s=60):
        k = r["key"]
        if k and k[0] == SG_DB_PARKED:
            last[k] = r["value"] is None
    old_keys = [k for k in last if len(k) == 1 + 32 + 8]
    new_keys = [k for k in last if len(k) == 1 + 16 + 8]
    assert old_keys and new_keys, (len(old_keys), len(new_keys))
    live = [k.hex() for k, tomb in last.items() if not tomb]
    assert not live, f"{len(live)} parked keys left live: {live[:5]}"
    restored = c.events("restore_done", 0)
    print(f"\nrolling upgrade: {len(out)} events exactly once; parked keys "
          f"{len(old_keys)} of format 2, {len(new_keys)} of format 3, all "
          f"tombstoned; C restored "
          f"{sum(e['records'] for e in restored)} records")


def test_without_step_1_an_old_instance_stops(bootstrap, seqgate_bin, old_bin,
                                               tmp_path):
    """Why step 1 exists: B runs this version without store.upgrade_from
    (format 3 records), A the earlier one; when B stops, A takes B's
    partitions and stops at their restore, naming the record it refuses
    (a format 3 key) — it never applies a partial state."""
    t_in, t_out, t_dlq = (unique_name("upg0-in"), unique_name("upg0-out"),
                          unique_name("upg0-dlq"))
    group = unique_name("sg-upg0")
    create_topics(bootstrap, {t_in: PARTS, t_out: PARTS, t_dlq: 1})

    def conf(instance, data):
        return make_config(bootstrap=bootstrap, group=group, instance=instance,
                           data_dir=str(tmp_path / data), input_topic=t_in,
                           output_topic=t_out, dlq_topic=t_dlq,
                           guarantee="exactly_once")

    probe = Probe(bootstrap, group)
    a = Seqgate(old_bin, conf("upg0-a", "data-a"), tmp_path / "run-a")
    b = Seqgate(seqgate_bin, conf("upg0-b", "data-b"), tmp_path / "run-b")
    try:
        a.start(timeout_s=90)
        b.start(timeout_s=90)
        produce(bootstrap, t_in,
                [public(dict(ce(f"agg-{i}", 1), _p=i % PARTS))
                 for i in range(4 * PARTS)], timeout_s=60)
        end = end_offsets(bootstrap, t_in)
        wait_until(lambda: probe.committed(t_in, PARTS) == end, 120,
                   "both instances' commits", 0.25)
        assert b.stop(60) == 0, b.log_tail()
        rc = a.wait_exit(120)
    finally:
        a.cleanup()
        b.cleanup()
        probe.close()
    assert rc == 1, a.log_tail()
    fatal = a.events("fatal")
    assert fatal and "(want 32)" in fatal[0]["detail"], a.log_tail()
