"""seqgatectl, the operator CLI, against a real broker and a running seqgate.

test_replay_park_overflow (semantics §3 "Replay", §4 caps): with
max_parked_per_aggregate 1 and on_park_overflow "dlq", an order's v1, v3, v4
give: v1 applied, v3 parked, v4 to the DLQ `park_overflow`; then v2 applies
and v3 drains. `seqgatectl replay --reason gap_timeout` selects nothing;
`--dry-run --reason park_overflow` names v4 and produces nothing; the real
replay puts v4 back on the input topic (original key, value, timestamp and
CloudEvents headers, no `__seqgate.errors.*` header, `__seqgate.replay`
naming the DLQ position), seqgate judges it again and applies it: output
v1 v2 v3 v4. Replaying once more produces the record again, and seqgate drops
it as a duplicate (its key is recorded as applied): output and DLQ unchanged.

test_inspect_gap: after v1 and v3 of an order, `seqgatectl inspect` (while
the daemon runs) shows last version 1, parked [3] with v3's input offset, the
partition's meta (consumer group, parked count 1); --json parses; without
--aggregate the order is listed as needing attention; an unknown aggregate
or a partition the store never processed exits 1; without --partition
every partition of the topic in the store is shown.

test_lookup (semantics §7, the result query): after v1, v3 and a stale
copy of v1 under a new id, `seqgatectl lookup` (while the daemon runs) says
v1 applied (output topic and partition), v3 parked awaiting v2 with a gap
deadline, the stale copy dead_lettered stale_version; an id never sent is
unknown (exit 1); a wrong number of scope parts is a usage error (exit 2).
`inspect --aggregate` finds the order without --partition and --topic.

test_lookup_not_current (docs/troubleshooting.md "Is the answer current?"):
an answer says how current its store is. While seqgate runs and the
partition was just written, an id never sent is unknown, exit 1, with
"store": writer running (seqgate's pid), the partition's last write,
current. A partition not written for longer than --max-age-ms (as one
that moved to another instance in a rebalance) makes the answer not
current: a warning on stderr, current false, and unknown exits 3 (a known
event still 0, with the warning). Once seqgate stopped, no process writes
the store: unknown exits 3 whatever the partition's age, and the warning
says the store is not being written, in text and --json.

test_partitions: `seqgatectl partitions` lists the input partition with the
consumer group and (--json) its changelog id, and the store's map size and
bytes in use.

test_arguments_inferred: with one input topic and one DLQ topic
configured, every command finds what it was not told and says what it
chose, one line on stderr: inspect (topic; partition from the store),
lookup (topic), release --aggregate (topic; partition from the store, as
inspect finds it), replay and dlq summary (the DLQ topic). An aggregate
the store does not hold leaves release nothing to infer: exit 2.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from kafkautil import consume_all, create_topics, end_offsets, produce, unique_name
from seqgate_proc import Seqgate, make_config, wait_until

SOURCE = "urn:example:ctl"
REPO_ROOT = Path(__file__).resolve().parents[2]


def event(order: str, seq: int, typ: str = "order.updated") -> dict:
    """One binary-mode CloudEvent; ce_id is unique per (order, version)."""
    return {
        "key": order.encode(),
        "value": json.dumps({"order": order, "seq": seq}).encode(),
        "headers": [("ce_specversion", b"1.0"),
                    ("ce_id", f"{order}-v{seq}".encode()),
                    ("ce_source", SOURCE.encode()),
                    ("ce_type", typ.encode()),
                    ("ce_sequence", str(seq).encode())],
        "partition": 0,
    }


def ctl(binary: str, *args: str, timeout_s: float = 90.0) -> subprocess.CompletedProcess:
    return subprocess.run([binary, *args], text=True, capture_output=True,
                          timeout=timeout_s)


def json_lines(text: str) -> list[dict]:
    """Every stdout line must be one JSON object."""
    out = []
    for line in text.splitlines():
        obj = json.loads(line)
        assert isinstance(obj, dict), line
        out.append(obj)
    return out


def versions(records: list[dict]) -> list[int]:
    return [int(r["headers_dict"]["ce_sequence"]) for r in records]


def setup_gate(bootstrap: str, tmp_path: Path, seqgate_bin: str,
               **config_args) -> tuple[Seqgate, dict]:
    names = {k: unique_name(f"sgctl-{k}") for k in ("in", "out", "dlq", "group")}
    create_topics(bootstrap, {names["in"]: 1, names["out"]: 1, names["dlq"]: 1})
    conf = make_config(bootstrap=bootstrap, group=names["group"], instance="ctl-1",
                       data_dir=str(tmp_path / "data"), input_topic=names["in"],
                       output_topic=names["out"], dlq_topic=names["dlq"],
                       gap_timeout_ms=600000, **config_args)
    sg = Seqgate(seqgate_bin, conf, tmp_path / "sg")
    sg.start()
    return sg, names


def test_replay_park_overflow(bootstrap, seqgate_bin, seqgatectl_bin, tmp_path):
    sg, n = setup_gate(bootstrap, tmp_path, seqgate_bin,
                       max_parked_per_aggregate=1, on_park_overflow="dlq")
    cfg = str(sg.config_path)
    try:
        order = "order-77"
        produced = produce(bootstrap, n["in"], [event(order, 1), event(order, 3),
                                                 event(order, 4)])
        v4_input_offset = produced[2][1]
        dlq = consume_all(bootstrap, n["dlq"], timeout_s=30, expect_count=1)
        assert len(dlq) == 1, dlq
        assert dlq[0]["headers_dict"]["__seqgate.errors.reason"] == b"park_overflow"
        assert dlq[0]["headers_dict"]["ce_sequence"] == b"4"
        out = consume_all(bootstrap, n["out"], timeout_s=30, expect_count=1)
        assert versions(out) == [1]

        produce(bootstrap, n["in"], [event(order, 2)])
        out = consume_all(bootstrap, n["out"], timeout_s=30, expect_count=3)
        assert versions(out) == [1, 2, 3]

        # A reason filter that matches nothing: nothing produced.
        in_end = end_offsets(bootstrap, n["in"])[0]
        r = ctl(seqgatectl_bin, "replay", "--config", cfg, "--dlq", n["dlq"],
                "--reason", "gap_timeout", "--json")
        assert r.returncode == 0, r.stderr
        summary = json_lines(r.stdout)[-1]
        assert summary["kind"] == "summary"
        assert (summary["read"], summary["selected"], summary["replayed"],
                summary["skipped"], summary["failed"]) == (1, 0, 0, 1, 0)

        # Dry run: v4 is named, nothing is produced.
        r = ctl(seqgatectl_bin, "replay", "--config", cfg, "--dlq", n["dlq"],
                "--reason", "park_overflow", "--dry-run", "--json")
        assert r.returncode == 0, r.stderr
        lines = json_lines(r.stdout)
        recs = [l for l in lines if l["kind"] == "record"]
        assert len(recs) == 1, lines
        assert recs[0]["action"] == "would_replay"
        assert (recs[0]["topic"], recs[0]["partition"]) == (n["in"], 0)
        assert (recs[0]["dlq_partition"], recs[0]["dlq_offset"]) == (0, dlq[0]["offset"])
        assert recs[0]["aggregate"] == order
        assert lines[-1]["selected"] == 1 and lines[-1]["replayed"] == 0
        assert end_offsets(bootstrap, n["in"])[0] == in_end

        # The replay: v4 goes back to the input and is applied.
        r = ctl(seqgatectl_bin, "replay", "--config", cfg, "--dlq", n["dlq"],
                "--reason", "park_overflow")
        assert r.returncode == 0, r.stdout + r.stderr
        assert "replayed 1" in r.stdout, r.stdout
        out = consume_all(bootstrap, n["out"], timeout_s=30, expect_count=4)
        assert versions(out) == [1, 2, 3, 4]

        inp = consume_all(bootstrap, n["in"], timeout_s=30, expect_count=5)
        assert len(inp) == 5
        replayed, original = inp[4], inp[v4_input_offset]
        assert not [h for h, _ in replayed["headers"]
                    if h.startswith("__seqgate.errors.")], replayed["headers"]
        assert replayed["headers_dict"]["__seqgate.replay"] == \
            f"{n['dlq']}/0/{dlq[0]['offset']}".encode()
        assert replayed["key"] == original["key"]
        assert replayed["value"] == original["value"]
        assert replayed["timestamp"] == original["timestamp"]
        assert replayed["headers"][:len(original["headers"])] == original["headers"]
        assert out[3]["headers_dict"]["__seqgate.source"] == \
            f"{n['in']}/0/{replayed['offset']}".encode()

        # Again: produced again, but the key is recorded as applied.
        dedup_before = (sg.last_stats() or {}).get("dedup_hits_total", 0)
        r = ctl(seqgatectl_bin, "replay", "--config", cfg, "--dlq", n["dlq"],
                "--reason", "park_overflow", "--json")
        assert r.returncode == 0, r.stderr
        assert json_lines(r.stdout)[-1]["replayed"] == 1
        wait_until(lambda: (sg.last_stats() or {}).get("dedup_hits_total", 0)
                   > dedup_before, 30, "the second replay to be dropped as a duplicate",
                   on_timeout=sg.log_tail)
        assert versions(consume_all(bootstrap, n["out"], timeout_s=10)) == [1, 2, 3, 4]
        assert len(consume_all(bootstrap, n["dlq"], timeout_s=10)) == 1
        assert sg.stop() == 0
    finally:
        sg.cleanup()


def test_inspect_gap(bootstrap, seqgate_bin, seqgatectl_bin, tmp_path):
    sg, n = setup_gate(bootstrap, tmp_path, seqgate_bin)
    cfg = str(sg.config_path)
    try:
        order = "order-9"
        produced = produce(bootstrap, n["in"], [event(order, 1), event(order, 3)])
        args = ["inspect", "--config", cfg, "--topic", n["in"], "--partition", "0",
                "--aggregate", order]

        def parked_shown():
            r = ctl(seqgatectl_bin, *args, "--json")
            if r.returncode != 0:
                return False
            agg = json_lines(r.stdout)[0]["aggregate"]
            return [p["version"] for p in agg["parked"]] == [3]

        wait_until(parked_shown, 30, "inspect to show v3 parked",
                   on_timeout=sg.log_tail)
        r = ctl(seqgatectl_bin, *args, "--json")
        assert r.returncode == 0, r.stderr
        doc = json_lines(r.stdout)
        assert len(doc) == 1
        doc = doc[0]
        agg = doc["aggregate"]
        assert agg["id"] == order
        assert agg["last_version"] == 1
        assert agg["flags"] == {"quarantined": False, "refetching": False}
        assert agg["parked_count"] == 1
        assert agg["parked"][0]["offset"] == produced[1][1]
        assert agg["parked"][0]["key"] == order
        assert agg["parked"][0]["type"] == "order.updated"
        assert agg["parked"][0]["parked_at"].endswith("Z")
        assert agg["snapshot_request"] is None
        assert doc["meta"]["group"] == sg.config["kafka"]["group.id"]
        assert doc["meta"]["parked_count"] == 1
        assert doc["meta"]["quarantined_count"] == 0

        r = ctl(seqgatectl_bin, *args)
        assert r.returncode == 0, r.stderr
        assert "last_version: 1" in r.stdout, r.stdout
        assert "- version: 3" in r.stdout, r.stdout

        r = ctl(seqgatectl_bin, "inspect", "--config", cfg, "--topic", n["in"],
                "--partition", "0", "--json")
        assert r.returncode == 0, r.stderr
        listing = json_lines(r.stdout)[0]
        assert [a["id"] for a in listing["attention"]] == [order]
        assert listing["aggregates"] == 1

        r = ctl(seqgatectl_bin, "inspect", "--config", cfg, "--topic", n["in"],
                "--partition", "0", "--aggregate", "no-such-order")
        assert r.returncode == 1 and "not found" in r.stderr, r.stderr
        r = ctl(seqgatectl_bin, "inspect", "--config", cfg, "--topic", n["in"],
                "--partition", "5")
        assert r.returncode == 1 and "no state" in r.stderr, r.stderr
        # without --partition: the partitions the store holds (one here)
        r = ctl(seqgatectl_bin, "inspect", "--config", cfg, "--topic", n["in"],
                "--json")
        assert r.returncode == 0, r.stderr
        assert [o["partition"] for o in json_lines(r.stdout)] == [0]
        assert sg.stop() == 0
    finally:
        sg.cleanup()


def test_lookup(bootstrap, seqgate_bin, seqgatectl_bin, tmp_path):
    sg, n = setup_gate(bootstrap, tmp_path, seqgate_bin)
    cfg = str(sg.config_path)
    try:
        order = "order-31"
        stale = event(order, 1)
        stale["headers"] = [(k, b"order-31-v1-again" if k == "ce_id" else v)
                            for k, v in stale["headers"]]
        produce(bootstrap, n["in"], [event(order, 1), event(order, 3), stale])
        dlq = consume_all(bootstrap, n["dlq"], timeout_s=30, expect_count=1)
        assert dlq[0]["headers_dict"]["__seqgate.errors.reason"] == b"stale_version"

        def lookup(ident: str, *extra: str) -> subprocess.CompletedProcess:
            return ctl(seqgatectl_bin, "lookup", "--config", cfg, "--topic",
                       n["in"], "--source", SOURCE, "--id", ident, *extra)

        def committed() -> bool:  # the DLQ record is out; the batch may not be
            r = lookup("order-31-v1-again", "--json")
            return r.returncode == 0
        wait_until(committed, 30, "the stale copy to be recorded",
                   on_timeout=sg.log_tail)

        r = lookup("order-31-v1", "--json")
        assert r.returncode == 0, r.stderr
        a = json_lines(r.stdout)[0]
        assert a["status"] == "applied", a
        assert a["output"] == {"topic": n["out"], "partition": 0}
        assert a["first_seen"].endswith("Z") and a["first_seen_ms"] > 0
        assert a["scope"] == [SOURCE]

        r = lookup("order-31-v3", "--json")
        assert r.returncode == 0, r.stderr
        p = json_lines(r.stdout)[0]
        assert p["status"] == "parked", p
        assert p["version"] == 3 and p["awaiting_version"] == 2
        assert p["aggregate_id"] == order
        assert p["gap_deadline_ms"] == p["parked_at_ms"] + 600000

        r = lookup("order-31-v1-again", "--json")
        assert r.returncode == 0, r.stderr
        d = json_lines(r.stdout)[0]
        assert d["status"] == "dead_lettered" and d["reason"] == "stale_version", d
        assert d["dlq_topic"] == n["dlq"]

        r = lookup("order-31-v1-again")  # human-readable
        assert r.returncode == 0 and "reason: stale_version" in r.stdout, r

        r = lookup("never-sent", "--json")
        assert r.returncode == 1, r
        u = json_lines(r.stdout)[0]
        assert u["status"] == "unknown" and u["why"] == "not_found", u

        r = ctl(seqgatectl_bin, "lookup", "--config", cfg, "--topic", n["in"],
                "--id", "order-31-v1")  # the scope has one part: --source
        assert r.returncode == 2 and "1 part" in r.stderr, r

        # inspect --aggregate: every partition searched, the one topic implied
        r = ctl(seqgatectl_bin, "inspect", "--config", cfg, "--aggregate", order,
                "--json")
        assert r.returncode == 0, r.stderr
        doc = json_lines(r.stdout)[0]
        assert doc["partition"] == 0
        assert doc["aggregate"]["last_version"] == 1
        assert [q["version"] for q in doc["aggregate"]["parked"]] == [3]
        assert sg.stop() == 0
    finally:
        sg.cleanup()


def test_lookup_not_current(bootstrap, seqgate_bin, seqgatectl_bin, tmp_path):
    sg, n = setup_gate(bootstrap, tmp_path, seqgate_bin)
    cfg = str(sg.config_path)
    try:
        produce(bootstrap, n["in"], [event("order-41", 1)])

        def lookup(ident: str, *extra: str) -> subprocess.CompletedProcess:
            return ctl(seqgatectl_bin, "lookup", "--config", cfg, "--topic",
                       n["in"], "--source", SOURCE, "--id", ident, *extra)
        wait_until(lambda: lookup("order-41-v1").returncode == 0, 30,
                   "order-41-v1 to be recorded", on_timeout=sg.log_tail)

        # running, the partition just written: a current "never seen"
        r = lookup("never-sent", "--json", "--max-age-ms", "600000")
        assert r.returncode == 1, r
        u = json_lines(r.stdout)[0]
        st = u["store"]
        assert u["status"] == "unknown" and st["current"] is True, u
        assert st["writer"] == "running" and st["writer_pid"] == sg.proc.pid
        assert st["warning"] is None and st["data_dir"] == str(tmp_path / "data")
        (p,) = st["partitions"]
        assert p["partition"] == 0 and p["current"] is True
        assert 0 <= p["last_write_age_ms"] < 600000 and p["last_write_ms"] > 0
        assert "warning" not in r.stderr, r.stderr
        # partitions and inspect say the same of the store
        r = ctl(seqgatectl_bin, "partitions", "--config", cfg, "--json")
        store = json_lines(r.stdout)[-1]
        assert (store["writer"], store["writer_pid"]) == ("running", sg.proc.pid)
        r = ctl(seqgatectl_bin, "inspect", "--config", cfg, "--json")
        assert json_lines(r.stdout)[0]["store"]["current"] is True, r.stdout

        # a partition written longer ago than --max-age-ms (an idle one,
        # or one revoked: the store cannot tell): not current, exit 3
        time.sleep(0.05)
        r = lookup("never-sent", "--json", "--max-age-ms", "1")
        assert r.returncode == 3, r
        st = json_lines(r.stdout)[0]["store"]
        assert st["current"] is False and st["writer"] == "running"
        assert st["partitions"][0]["current"] is False
        assert "not written for longer than --max-age" in st["warning"]
        assert f"--group {n['group']}" in st["warning"]
        assert "warning: partition 0 of " in r.stderr, r.stderr
        # a known event keeps exit 0, with the warning
        r = lookup("order-41-v1", "--json", "--max-age-ms", "1")
        assert r.returncode == 0, r
        a = json_lines(r.stdout)[0]
        assert a["status"] == "applied" and a["store"]["current"] is False
        assert "warning: partition 0 of " in r.stderr, r.stderr

        # seqgate stopped: the store is not being written
        assert sg.stop() == 0
        r = lookup("never-sent", "--json")
        assert r.returncode == 3, r
        st = json_lines(r.stdout)[0]["store"]
        assert st["writer"] == "not_running" and st["writer_pid"] is None
        assert st["current"] is False, st
        assert "is not being written" in st["warning"]
        assert "does not mean never seen" in json_lines(r.stdout)[0]["detail"]
        assert "is not being written" in r.stderr, r.stderr
        r = lookup("never-sent")  # text: the same warning and exit status
        assert r.returncode == 3 and "is not being written" in r.stderr, r
        assert "status: unknown" in r.stdout, r.stdout
        r = lookup("order-41-v1")
        assert r.returncode == 0 and "is not being written" in r.stderr, r
        r = ctl(seqgatectl_bin, "partitions", "--config", cfg, "--json")
        assert r.returncode == 0 and "is not being written" in r.stderr, r
        store = json_lines(r.stdout)[-1]
        assert (store["writer"], store["writer_pid"]) == ("not_running", None)
        r = ctl(seqgatectl_bin, "partitions", "--config", cfg)
        assert "writer: not running" in r.stdout, r.stdout
        r = ctl(seqgatectl_bin, "inspect", "--config", cfg, "--aggregate",
                "order-41", "--json")
        assert r.returncode == 0 and "is not being written" in r.stderr, r
        assert json_lines(r.stdout)[0]["store"]["current"] is False
    finally:
        sg.cleanup()


def test_partitions(bootstrap, seqgate_bin, seqgatectl_bin, tmp_path):
    sg, n = setup_gate(bootstrap, tmp_path, seqgate_bin)
    cfg = str(sg.config_path)
    group = sg.config["kafka"]["group.id"]
    try:
        produce(bootstrap, n["in"], [event("order-1", 1), event("order-1", 2)])
        assert len(consume_all(bootstrap, n["out"], timeout_s=30, expect_count=2)) == 2

        def listed():
            r = ctl(seqgatectl_bin, "partitions", "--config", cfg, "--json")
            if r.returncode != 0:
                return False
            parts = [l for l in json_lines(r.stdout) if l["kind"] == "partition"]
            return any(p["topic"] == n["in"] and p["input_offset"] == 2
                       for p in parts)

        wait_until(listed, 30, "partitions to show the input offset 2",
                   on_timeout=sg.log_tail)
        r = ctl(seqgatectl_bin, "partitions", "--config", cfg, "--json")
        assert r.returncode == 0, r.stderr
        lines = json_lines(r.stdout)
        parts = [l for l in lines if l["kind"] == "partition"]
        assert [(p["topic"], p["partition"], p["group"]) for p in parts] == \
            [(n["in"], 0, group)]
        # the changelog id its restore wrote and recorded
        assert re.fullmatch(r"[0-9a-f]{32}", parts[0]["changelog_id"]), parts
        assert parts[0]["changelog_id_offset"] >= 0, parts
        store = lines[-1]
        assert store["kind"] == "store" and store["partitions"] == 1
        assert 0 < store["used_bytes"] <= store["map_size_bytes"]

        r = ctl(seqgatectl_bin, "partitions", "--config", cfg)
        assert r.returncode == 0, r.stderr
        row = [l for l in r.stdout.splitlines() if l.startswith(f"{n['in']}/0 ")]
        assert len(row) == 1 and group in row[0], r.stdout
        assert sg.stop() == 0
    finally:
        sg.cleanup()


def test_release_quarantine_then_replay(bootstrap, seqgate_bin, seqgatectl_bin,
                                        tmp_path):
    """semantics §4: a quarantined aggregate stays so "until a snapshot or an
    operator resolves it". The operator's way: `seqgatectl release` (a
    control record on the input partition, applied in order by seqgate),
    then `seqgatectl replay` of the aggregate's DLQ records."""
    names = {k: unique_name(f"sgrel-{k}") for k in ("in", "out", "dlq", "group")}
    create_topics(bootstrap, {names["in"]: 1, names["out"]: 1, names["dlq"]: 1})
    conf = make_config(bootstrap=bootstrap, group=names["group"], instance="rel-1",
                       data_dir=str(tmp_path / "data"), input_topic=names["in"],
                       output_topic=names["out"], dlq_topic=names["dlq"],
                       gap_timeout_ms=1000)
    sg = Seqgate(seqgate_bin, conf, tmp_path / "sg")
    sg.start()
    cfg = str(sg.config_path)
    order = "order-q"
    try:
        produce(bootstrap, names["in"], [event(order, 1), event(order, 3)])
        # v3 waits for v2, times out: DLQ gap_timeout, order quarantined
        dlq = consume_all(bootstrap, names["dlq"], timeout_s=30, expect_count=1)
        assert [d["headers_dict"]["__seqgate.errors.reason"] for d in dlq] == \
            [b"gap_timeout"]
        produce(bootstrap, names["in"], [event(order, 2)])  # too late
        dlq = consume_all(bootstrap, names["dlq"], timeout_s=30, expect_count=2)
        assert [d["headers_dict"]["__seqgate.errors.reason"] for d in dlq] == \
            [b"gap_timeout", b"aggregate_quarantined"]
        partition = dlq[0]["headers_dict"]["__seqgate.errors.partition"].decode()

        def quarantined() -> bool:
            r = ctl(seqgatectl_bin, "inspect", "--config", cfg, "--topic",
                    names["in"], "--partition", partition, "--aggregate", order,
                    "--json")
            assert r.returncode == 0, r.stderr
            return json_lines(r.stdout)[0]["aggregate"]["flags"]["quarantined"]
        # seqgatectl reads the store's last checkpoint (semantics §7): the
        # quarantine is there once the batch that made it is checkpointed
        wait_until(quarantined, 10, "the quarantine in the store", 0.1)
        rel = ["release", "--config", cfg, "--topic", names["in"],
               "--partition", partition, "--aggregate", order]
        # refused before anything is sent: a state this topic does not have
        # (it has no state machine), a version below L (L = 1), a version
        # that is not a u64
        r = ctl(seqgatectl_bin, *rel, "--state", "BOGUS", "--wait")
        assert r.returncode == 2 and "no state machine" in r.stderr, r
        r = ctl(seqgatectl_bin, *rel, "--version", "0", "--wait")
        assert r.returncode == 2 and "below the last applied" in r.stderr, r
        r = ctl(seqgatectl_bin, *rel, "--version", "-1")
        assert r.returncode == 2, r
        assert quarantined()
        # --wait says whether it landed
        r = ctl(seqgatectl_bin, *rel, "--wait", "--json")
        assert r.returncode == 0, r.stderr
        res = json_lines(r.stdout)[0]
        assert res["released"] is True and res["outcome"] == "released", res
        assert not quarantined()
        # nothing left to release
        r = ctl(seqgatectl_bin, *rel, "--wait")
        assert r.returncode == 2 and "not quarantined" in r.stderr, r

        # replay v2 (quarantined) and v3 (timed out), in DLQ order: v3 parks,
        # v2 applies and v3 drains
        r = ctl(seqgatectl_bin, "replay", "--config", cfg, "--dlq", names["dlq"],
                "--aggregate", order, "--reason", "gap_timeout",
                "--reason", "aggregate_quarantined")
        assert r.returncode == 0, r.stderr
        out = consume_all(bootstrap, names["out"], timeout_s=30, expect_count=3)
        assert versions(out) == [1, 2, 3]
        # an unknown reason is a usage error, not "0 selected"
        r = ctl(seqgatectl_bin, "replay", "--config", cfg, "--dlq", names["dlq"],
                "--reason", "gap_timout")
        assert r.returncode == 2 and "not a DLQ reason" in r.stderr, r
        assert sg.stop() == 0
        stats = sg.last_stats()
        assert stats["releases_total"] == 1, stats
    finally:
        sg.cleanup()


def test_arguments_inferred(bootstrap, seqgate_bin, seqgatectl_bin, tmp_path):
    sg, n = setup_gate(bootstrap, tmp_path, seqgate_bin)
    cfg = str(sg.config_path)
    topic_note = f"topic {n['in']} (the config's one input topic)"
    dlq_note = f"DLQ {n['dlq']} (the config's one dlq_topic)"
    try:
        order = "order-55"
        produce(bootstrap, n["in"], [event(order, 1), event(order, 3)])
        wait_until(lambda: ctl(seqgatectl_bin, "lookup", "--config", cfg,
                               "--source", SOURCE, "--id", f"{order}-v3"
                               ).returncode == 0, 30, "v3 parked")

        r = ctl(seqgatectl_bin, "inspect", "--config", cfg, "--json")
        assert r.returncode == 0, r.stderr
        assert r.stderr.splitlines() == [
            f"seqgatectl: using {topic_note}, partition 0 (the store's one "
            f"partition of {n['in']})"]
        (obj,) = json_lines(r.stdout)
        assert (obj["topic"], obj["partition"]) == (n["in"], 0)
        assert [a["id"] for a in obj["attention"]] == [order]

        r = ctl(seqgatectl_bin, "lookup", "--config", cfg, "--source", SOURCE,
                "--id", f"{order}-v3", "--json")
        assert r.returncode == 0, r.stderr
        assert r.stderr.splitlines() == [f"seqgatectl: using {topic_note}"]
        assert json_lines(r.stdout)[0]["status"] == "parked"

        # release finds the partition as inspect does (the store)
        r = ctl(seqgatectl_bin, "release", "--config", cfg, "--aggregate",
                order, "--version", "2", "--wait", "--json")
        assert r.returncode == 0, r.stderr
        assert r.stderr.splitlines() == [
            f"seqgatectl: using {topic_note}, partition 0 (the store's "
            f"partition holding aggregate {order})"]
        rel = json_lines(r.stdout)[0]
        assert (rel["outcome"], rel["topic"], rel["partition"]) == \
            ("released", n["in"], 0)
        r = ctl(seqgatectl_bin, "release", "--config", cfg, "--aggregate",
                "no-such-order")
        assert r.returncode == 2, r
        assert "--partition is required: aggregate no-such-order is not in " \
            "the store" in r.stderr

        # the DLQ topic of the config
        r = ctl(seqgatectl_bin, "replay", "--config", cfg, "--all",
                "--dry-run", "--json")
        assert r.returncode == 0, r.stderr
        assert r.stderr.splitlines() == [f"seqgatectl: using {dlq_note}"]
        assert json_lines(r.stdout)[-1]["dlq_topic"] == n["dlq"]
        r = ctl(seqgatectl_bin, "dlq", "summary", "--config", cfg, "--json")
        assert r.returncode == 0, r.stderr
        assert r.stderr.splitlines() == [f"seqgatectl: using {dlq_note}"]
        # --log-level error: nothing said
        r = ctl(seqgatectl_bin, "inspect", "--config", cfg, "--log-level",
                "error", "--json")
        assert r.returncode == 0 and r.stderr == "", r
        assert sg.stop() == 0
    finally:
        sg.cleanup()
