"""Epoch-fenced versions on a real broker (semantics §4b, ordering.epoch).

Two producers write the same aggregates: the leader of epoch 1, and the
leader of epoch 2 that replaced it. The deposed epoch-1 leader does not know
it was replaced and keeps writing events with higher versions; every one of
them reaches seqgate after the aggregate saw epoch 2, so each is dead-lettered
`fenced_epoch`, while the new leader's events apply in version order (the
versions continue across epochs: epoch_versions "continue", a Raft log
index). One epoch-1 event parked behind a gap is fenced when epoch 2 fills
the gap instead of being released.

Then the partition moves to an instance with an empty store (exactly_once:
it restores from the changelog): the restored aggregate still has epoch 2,
so the deposed leader's next event is fenced there too; `seqgatectl inspect`
shows each aggregate's epoch and the epoch of what is parked.
"""

from __future__ import annotations

import json
import subprocess
from collections import Counter, defaultdict

from kafkautil import consume_all, create_topics, produce, unique_name
from seqgate_proc import Seqgate, make_config, wait_until
from test_scenario import _hdr, _total

SOURCE = "urn:example:ledger"
OUT, FENCED, PARKED = "out", "fenced", "parked"


def ev(agg: str, v: int, epoch: int, eid: str, expect: str) -> dict:
    value = json.dumps({"account": agg, "v": v, "epoch": epoch,
                        "id": eid}).encode()
    return {
        "key": agg.encode(),
        "value": value,
        "headers": [("ce_specversion", b"1.0"), ("ce_id", eid.encode()),
                    ("ce_source", SOURCE.encode()),
                    ("ce_type", b"entry.posted"),
                    ("ce_sequence", str(v).encode()),
                    ("ce_epoch", str(epoch).encode())],
        "partition": 0,
        "_agg": agg, "_v": v, "_id": eid, "_expect": expect,
    }


def public(r: dict) -> dict:
    return {k: v for k, v in r.items() if not k.startswith("_")}


def phase1() -> list[dict]:
    return [
        ev("acct-1", 1, 1, "a1-e1", OUT),
        ev("acct-1", 2, 1, "a2-e1", OUT),
        ev("acct-1", 3, 1, "a3-e1", OUT),
        ev("acct-2", 1, 1, "b1-e1", OUT),
        # v4 of epoch 1 was lost: v5 parks behind the gap
        ev("acct-1", 5, 1, "a5-e1", FENCED),
        # the new leader: its v4 fills the gap, but the parked v5 is epoch 1
        ev("acct-1", 4, 2, "a4-e2", OUT),
        ev("acct-2", 2, 2, "b2-e2", OUT),
        # the deposed leader keeps writing, with versions that would apply
        ev("acct-1", 6, 1, "a6-e1", FENCED),
        ev("acct-2", 3, 1, "b3-e1", FENCED),
        ev("acct-1", 7, 1, "a7-e1", FENCED),
        ev("acct-1", 5, 2, "a5-e2", OUT),
        ev("acct-2", 3, 2, "b3-e2", OUT),
        ev("acct-1", 6, 2, "a6-e2", OUT),
    ]


def phase2() -> list[dict]:
    return [
        ev("acct-1", 8, 1, "a8-e1", FENCED),
        ev("acct-1", 7, 2, "a7-e2", OUT),
        ev("acct-2", 4, 1, "b4-e1", FENCED),
        # a third aggregate starts at epoch 3; its v3 waits for v2
        ev("acct-3", 1, 3, "c1-e3", OUT),
        ev("acct-3", 3, 3, "c3-e3", PARKED),
    ]


def inspect(ctl: str, config: str, topic: str, agg: str) -> dict:
    r = subprocess.run([ctl, "inspect", "--config", config, "--topic", topic,
                        "--partition", "0", "--aggregate", agg, "--json"],
                       text=True, capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.splitlines()[0])["aggregate"]


def test_deposed_leader_fenced(bootstrap, seqgate_bin, seqgatectl_bin,
                               tmp_path):
    t_in, t_out, t_dlq = (unique_name("ledger"), unique_name("ledger-clean"),
                          unique_name("ledger-dlq"))
    group = unique_name("sg-epochs")
    create_topics(bootstrap, {t_in: 1, t_out: 1, t_dlq: 1})

    def conf(instance: str, data: str) -> dict:
        c = make_config(bootstrap=bootstrap, group=group, instance=instance,
                        data_dir=str(tmp_path / data), input_topic=t_in,
                        output_topic=t_out, dlq_topic=t_dlq,
                        gap_timeout_ms=600000, stats_interval_ms=300,
                        guarantee="exactly_once")
        c["topics"][t_in]["ordering"]["epoch"] = "ce:epoch"
        c["topics"][t_in]["ordering"]["epoch_versions"] = "continue"
        return c

    runs = []
    records, placed = [], []
    for phase, instance in ((phase1(), "epochs-a"), (phase2(), "epochs-b")):
        placed += produce(bootstrap, t_in, [public(r) for r in phase])
        records += phase
        n_out = sum(r["_expect"] == OUT for r in records)
        n_dlq = sum(r["_expect"] == FENCED for r in records)
        sg = Seqgate(seqgate_bin, conf(instance, f"data-{instance}"),
                     tmp_path / f"run-{instance}")
        runs.append(sg)
        try:
            sg.start()
            wait_until(lambda: _total(bootstrap, t_out) >= n_out and
                       _total(bootstrap, t_dlq) >= n_dlq, 60,
                       f"{instance}: {n_out} outputs and {n_dlq} DLQ records",
                       on_timeout=lambda: "\n" + sg.log_tail())
            # a stats line after the last batch
            wait_until(lambda: (sg.last_stats() or {}).get("records_total")
                       == len(phase), 20, f"{instance}: the stats line",
                       on_timeout=lambda: "\n" + sg.log_tail())
            assert sg.stop() == 0, sg.log_tail()
        finally:
            sg.cleanup()

    by_pos = {pos: r for r, pos in zip(records, placed)}
    out = consume_all(bootstrap, t_out, timeout_s=30,
                      expect_count=sum(r["_expect"] == OUT for r in records))
    dlq = consume_all(bootstrap, t_dlq, timeout_s=30,
                      expect_count=sum(r["_expect"] == FENCED for r in records))
    detail = (f"\noutput: {[_hdr(o, 'ce_id') for o in out]}"
              f"\ndlq: {[(_hdr(d, 'ce_id'), _hdr(d, '__seqgate.errors.reason')) for d in dlq]}"
              f"\nlast log:\n{runs[-1].log_tail(40)}")

    # the new leader's events, each once, in version order per aggregate
    per_agg = defaultdict(list)
    for o in out:
        _t, p, off = _hdr(o, "__seqgate.source").rsplit("/", 2)
        src = by_pos[(int(p), int(off))]
        assert src["_expect"] == OUT, f"{src['_id']} was output" + detail
        per_agg[src["_agg"]].append((src["_v"], _hdr(o, "ce_epoch")))
    assert dict(per_agg) == {
        "acct-1": [(1, "1"), (2, "1"), (3, "1"), (4, "2"), (5, "2"),
                   (6, "2"), (7, "2")],
        "acct-2": [(1, "1"), (2, "2"), (3, "2")],
        "acct-3": [(1, "3")],
    }, "output" + detail

    # the deposed leader's events, each in the DLQ as fenced_epoch
    got = Counter()
    for d in dlq:
        p = int(_hdr(d, "__seqgate.errors.partition"))
        off = int(_hdr(d, "__seqgate.errors.offset"))
        src = by_pos[(p, off)]
        assert d["value"] == src["value"]
        assert "epoch" in (_hdr(d, "__seqgate.errors.detail") or "")
        got[(src["_id"], _hdr(d, "__seqgate.errors.reason"))] += 1
    assert got == Counter({(r["_id"], "fenced_epoch"): 1 for r in records
                           if r["_expect"] == FENCED}), "DLQ" + detail

    st_a, st_b = runs[0].last_stats(), runs[1].last_stats()
    assert st_a["fenced_epoch_total"] == 4, st_a
    assert st_a["dlq_by_reason"]["fenced_epoch"] == 4, st_a
    assert st_a["parked_events"] == 0, st_a
    assert st_b["fenced_epoch_total"] == 2, st_b
    restored = runs[1].events("restore_done")
    assert len(restored) == 1 and restored[0]["records"] > 0, restored

    # seqgatectl inspect on the second instance's store
    cfg = str(runs[1].config_path)
    a1 = inspect(seqgatectl_bin, cfg, t_in, "acct-1")
    assert (a1["epoch"], a1["last_version"], a1["parked_count"]) == (2, 7, 0), a1
    a3 = inspect(seqgatectl_bin, cfg, t_in, "acct-3")
    assert (a3["epoch"], a3["last_version"]) == (3, 1), a3
    assert [(p["version"], p["epoch"]) for p in a3["parked"]] == [(3, 3)], a3
