"""A store after a machine stop is rebuilt, never trusted, in both guarantees
(semantics §6, "Durability of the store"; docs/guarantees.md "Durability of the
store").

LMDB commits are not synced per batch: the changelog is the durable copy
(exactly_once: committed in the transaction; at_least_once: its markers
acknowledged before the LMDB commit, the input offsets after it). test_machine_stop_rebuilds_store runs seqgate on the first half
of a stream until its offsets are committed, kills it (SIGKILL), and then
makes the data_dir look like one whose machine stopped: the session file
names another boot, and data.mdb is torn (its pages overwritten, as
unsynced writes can leave it). The second half repeats every event of the
first half (identical redeliveries) and continues each aggregate's
versions. On restart seqgate must log `store_rebuilt`, restore its state
from the changelog, drop every redelivery as a duplicate, and apply the
new versions in order: every distinct event in the output exactly once,
nothing in the DLQ; its restores log restore_progress lines. Had it trusted the torn store it could not open it;
had it started from an empty store without the changelog it would emit
the redeliveries again.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kafkautil import consume_all, create_topics, end_offsets, produce, unique_name
from seqgate_proc import Seqgate, make_config, wait_until
from test_restart import Probe

SOURCE = "urn:example:durability"
N_AGGREGATES = 40
HALF = 10  # versions per aggregate in each half


def record(a: str, v: int, p: int) -> dict:
    eid = f"{a}-v{v}"
    return {"key": a.encode(), "partition": p,
            "value": json.dumps({"aggregate": a, "version": v}).encode(),
            "headers": [("ce_specversion", b"1.0"), ("ce_id", eid.encode()),
                        ("ce_source", SOURCE.encode()),
                        ("ce_type", b"thing.updated"),
                        ("ce_sequence", str(v).encode())]}


def half(first_v: int) -> list[dict]:
    return [record(f"agg-{i:02d}", v, i % 2)
            for v in range(first_v, first_v + HALF)
            for i in range(N_AGGREGATES)]


@pytest.mark.parametrize("guarantee", ["exactly_once", "at_least_once"])
def test_machine_stop_rebuilds_store(bootstrap, seqgate_bin, tmp_path,
                                     guarantee):
    t_in, t_out, t_dlq = (unique_name("dur-in"), unique_name("dur-out"),
                          unique_name("dur-dlq"))
    group = unique_name("sg-dur")
    create_topics(bootstrap, {t_in: 2, t_out: 2, t_dlq: 1})
    data = tmp_path / "data"
    conf = make_config(bootstrap=bootstrap, group=group, instance="dur",
                       data_dir=str(data), input_topic=t_in,
                       output_topic=t_out, dlq_topic=t_dlq,
                       gap_timeout_ms=60000, guarantee=guarantee,
                       batch_max_records=50,
                       # restore_progress (and stats) lines every 1 ms
                       stats_interval_ms=1)
    sg = Seqgate(seqgate_bin, conf, tmp_path / "run")
    probe = Probe(bootstrap, group)
    first = half(1)
    try:
        produce(bootstrap, t_in, first, timeout_s=60)
        end1 = end_offsets(bootstrap, t_in)
        sg.start()
        wait_until(lambda: probe.committed(t_in, 2) == end1, 90,
                   f"committed offsets {end1}", 0.25,
                   on_timeout=lambda: "\n" + sg.log_tail())
        sg.kill9()

        session = Path(data) / "seqgate.session"
        line = session.read_text()
        assert " open " in line, f"a deferred session is open: {line!r}"
        assert not sg.events("store_rebuilt", 0)
        # The machine "stopped": another boot, and torn pages.
        session.write_text(line.rsplit(" ", 1)[0]
                           + " 00000000-0000-0000-0000-000000000000\n")
        mdb = Path(data) / "data.mdb"
        size = mdb.stat().st_size
        with open(mdb, "r+b") as f:
            for off in range(0, size, 4096 * 3):
                f.seek(off)
                f.write(os.urandom(64))

        # Every event again (redeliveries), then the next versions.
        produce(bootstrap, t_in, first + half(HALF + 1), timeout_s=60)
        end2 = end_offsets(bootstrap, t_in)
        sg.start()
        wait_until(lambda: probe.committed(t_in, 2) == end2, 120,
                   f"committed offsets {end2}", 0.25,
                   on_timeout=lambda: "\n" + sg.log_tail())
        rc = sg.stop()
        assert rc == 0, f"exit status {rc}\n{sg.log_tail()}"
        rebuilt = sg.events("store_rebuilt", 1)
        assert rebuilt, "no store_rebuilt line\n" + sg.log_tail()
        assert "machine stopped" in json.dumps(rebuilt[0])
        assert " closed " in session.read_text()
        # the rebuilt partitions' restores said how far they were
        prog = sg.events("restore_progress", 1)
        assert prog, "no restore_progress line\n" + sg.log_tail()
        for e in prog:
            assert e["records"] > 0 and e["offset"] > e["from"], e
            assert e["offset"] <= e.get("high_watermark", e["offset"]), e
            # how much there is and when it will be done
            assert e["total"] == e["high_watermark"] - e["from"], e
            assert 0 < e["records"] <= e["total"], e
            assert e["records_per_second"] >= 0, e
            assert e["eta_seconds"] >= 0, e
    finally:
        sg.cleanup()
        probe.close()

    n = N_AGGREGATES * HALF * 2
    out = consume_all(bootstrap, t_out, timeout_s=60, expect_count=n)
    ids = [o["headers_dict"].get("ce_id") for o in out]
    assert len(ids) == n and len(set(ids)) == n, \
        f"{len(ids)} outputs, {len(set(ids))} distinct; want {n} once each"
    per_agg: dict[str, list[int]] = {}
    for o in out:
        h = o["headers_dict"]
        per_agg.setdefault(o["key"].decode(), []).append(int(h["ce_sequence"]))
    for a, vs in per_agg.items():
        assert vs == list(range(1, 2 * HALF + 1)), f"{a}: {vs}"
    assert consume_all(bootstrap, t_dlq, timeout_s=20) == []


def old_format_store(path: Path) -> None:
    """An LMDB environment at PATH shaped like a store of format 1 (its
    databases, no format number), written with lmdb-utils' mdb_load."""
    import subprocess
    path.mkdir(parents=True)
    dump = "".join(
        "VERSION=3\nformat=bytevalue\ndatabase=%s\ntype=btree\n"
        "HEADER=END\n 78\n \nDATA=END\n" % db
        for db in ("dedup", "expiry", "agg", "parked", "since", "meta",
                   "snapreq", "snapdue"))
    subprocess.run(["mdb_load", "-f", "/dev/stdin", str(path)], input=dump,
                   text=True, check=True, capture_output=True)


def test_earlier_format_store_is_set_aside(bootstrap, seqgate_bin, tmp_path):
    """A store of an earlier format is set aside, not removed (docs/upgrade.md
    "Store format 2"): store_rebuilt says where it is kept and that the
    partitions are restored from the changelog, and never that it was
    removed; the set-aside copy holds the old data.mdb."""
    t_in, t_out, t_dlq = (unique_name("fmt-in"), unique_name("fmt-out"),
                          unique_name("fmt-dlq"))
    create_topics(bootstrap, {t_in: 1, t_out: 1, t_dlq: 1})
    data = tmp_path / "data"
    old_format_store(data)
    conf = make_config(bootstrap=bootstrap, group=unique_name("sg-fmt"),
                       instance="fmt", data_dir=str(data), input_topic=t_in,
                       output_topic=t_out, dlq_topic=t_dlq)
    sg = Seqgate(seqgate_bin, conf, tmp_path / "run")
    try:
        sg.start()
        assert sg.stop() == 0, sg.log_tail()
        rebuilt = sg.events("store_rebuilt")
        assert len(rebuilt) == 1, sg.log_tail()
        line = rebuilt[0]
        assert "earlier store format" in line["reason"], line
        # not "removed": the old store is kept, and the line says where
        assert not line["action"].startswith("removed"), line
        assert "kept where the reason says" in line["action"], line
        assert "restored from its changelog" in line["action"], line
        kept = [p for p in data.iterdir() if p.name.startswith("store-format-1-")]
        assert len(kept) == 1, list(data.iterdir())
        assert str(kept[0]) in line["reason"], line
        assert (kept[0] / "data.mdb").stat().st_size > 0
    finally:
        sg.cleanup()
