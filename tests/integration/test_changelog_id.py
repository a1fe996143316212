"""The changelog's identity (semantics §6 "The changelog's identity").

A store is a cache of its changelog. When the changelog topic is deleted and
created again, or seqgate is pointed at another cluster, the store's
checkpoint names offsets of a log that no longer exists: a restore "from the
checkpoint" of the new log reads nothing of what the store holds, the store
and the changelog part ways, and the next owner of the partition (a restore
from the start) forgets every dedup record and aggregate. seqgate writes a
random changelog id record into every changelog partition it restores
without finding one, keeps the id and the record's offset in the partition's
meta, and refuses (SG_ERR_FOREIGN, exit 2) a restore from a changelog that
no longer holds that record there.

test_restart_loop_on_recreated_changelog_refused (at_least_once): the
  changelog deleted while seqgate is stopped; a supervisor restarts seqgate
  again and again. Every start writes its claim records before the restore,
  so the new log grows past the store's checkpoint after a few starts; each
  start must still be refused, with exit 2.
test_changelog_recreated_while_running_refused (exactly_once): the
  changelog deleted and created again while seqgate runs; the next batches
  land in the new log and move the store's checkpoint into it. The next
  start must refuse, not restore "0 records" and go on.
test_another_writers_changelog_refused (both guarantees): the changelog
  deleted; another instance with an empty data_dir takes the partition,
  creates the changelog again and writes past the first store's checkpoint;
  the first store, started again, must be refused (its id record is not in
  that log).
test_store_from_before_the_id_is_accepted (both guarantees): a store whose
  meta has no changelog id (written before the id existed; made here by
  cutting the field off with lmdb-utils) restores as before, gets an id
  written and recorded, and is checked against it from the next start on.
test_id_removed_by_retention_recorded_anew: a changelog with
  cleanup.policy=compact,delete whose log start moved past the id record
  (DeleteRecords, as retention would): the id cannot be checked, which is
  said (changelog_id_unverifiable), and a new one is written and recorded.
test_id_survives_compaction: the changelog compacted (small segments, a
  cleaner that runs at once) while many records of one aggregate are
  rewritten; the id record is still there, found by a delta restore (a
  restart) and by a restore from the start (an empty data_dir).
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from kafkautil import (consume_all, create_topics, delete_topics,
                       produce, unique_name)
from seqgate_proc import Seqgate, make_config, wait_until

SOURCE = "urn:example:clid"
ID_KEY_PREFIX = b"\xffI"  # kafka_changelog.h: the changelog id record's key
META_VLEN = 1 + 255 + 8 * 8 + 8 + 1 + 5 * 8  # store_int.h META_VLEN
ID_FIELD_LEN = 1 + 16 + 8  # flag, id, offset


def event(agg: str, v: int, ident: str | None = None) -> dict:
    ident = ident or f"{agg}-{v}"
    return {"key": agg, "value": json.dumps({"v": v}), "partition": 0,
            "headers": [("ce_specversion", b"1.0"), ("ce_id", ident.encode()),
                        ("ce_source", SOURCE.encode()), ("ce_type", b"t"),
                        ("ce_sequence", str(v).encode())]}


def names(prefix: str) -> dict:
    return {k: unique_name(f"{prefix}-{k}")
            for k in ("in", "out", "dlq", "group")}


def setup(bootstrap: str, prefix: str, tmp_path: Path, guarantee: str,
          data: str = "data", instance: str = "clid-1") -> tuple[dict, dict, str]:
    n = names(prefix)
    create_topics(bootstrap, {n["in"]: 1, n["out"]: 1, n["dlq"]: 1})
    conf = make_config(bootstrap=bootstrap, group=n["group"], instance=instance,
                       data_dir=str(tmp_path / data), input_topic=n["in"],
                       output_topic=n["out"], dlq_topic=n["dlq"],
                       guarantee=guarantee)
    return n, conf, f"{n['group']}-{n['in']}-changelog"


def drop_changelog(bootstrap: str, changelog: str) -> None:
    delete_topics(bootstrap, [changelog])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    wait_until(lambda: changelog not in admin.list_topics(timeout=10).topics,
               30, "the changelog's deletion")


def outputs(bootstrap: str, topic: str, guarantee: str) -> int:
    """Records in `topic` a read_committed consumer reads (its end offsets
    count transaction markers too)."""
    return len(consume_all(bootstrap, topic, timeout_s=10))


def run_until_done(sg: Seqgate, bootstrap: str, n: dict, guarantee: str,
                   want: int) -> None:
    sg.start()
    wait_until(lambda: outputs(bootstrap, n["out"], guarantee) >= want, 60,
               "the output", on_timeout=lambda: "\n" + sg.log_tail())
    assert sg.stop() == 0, sg.log_tail()


def start_once(sg: Seqgate, timeout_s: float = 60.0) -> int | None:
    """Starts `sg` and waits for it to exit by itself: its exit status, or
    None when it ran (then it is stopped cleanly here)."""
    sg.start(wait_assigned=False)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if sg.proc.poll() is not None:
            return sg.wait_exit(5)
        if sg.events("partitions_assigned") and sg.events("restore_done"):
            # restored and taking input: give it a moment to refuse anyway
            time.sleep(2)
            if sg.proc.poll() is not None:
                return sg.wait_exit(5)
            assert sg.stop() == 0, sg.log_tail()
            return None
        time.sleep(0.2)
    raise AssertionError("neither refused nor running:\n" + sg.log_tail())


def refusal(sg: Seqgate) -> dict:
    """The run's `exiting` line, checked to be a refusal of the changelog
    that names the error in words and the partition."""
    ex = sg.events("exiting")
    assert ex, sg.log_tail()
    line = ex[-1]
    assert line["error"] == "SG_ERR_FOREIGN", line
    assert line.get("error_text"), line  # the error in words
    assert line.get("exit_status") == 2, line
    return line


def id_records(bootstrap: str, changelog: str) -> list[tuple[int, bytes]]:
    """(offset, key) of every changelog id record in partition 0."""
    return [(r["offset"], r["key"]) for r in consume_all(bootstrap, changelog,
                                                         timeout_s=10)
            if r["partition"] == 0 and r["key"]
            and r["key"].startswith(ID_KEY_PREFIX) and len(r["key"]) == 18]


def test_restart_loop_on_recreated_changelog_refused(bootstrap, seqgate_bin,
                                                     tmp_path):
    n, conf, changelog = setup(bootstrap, "clid-loop", tmp_path,
                               "at_least_once")
    produce(bootstrap, n["in"], [event(a, v) for a in ("a", "b")
                                 for v in (1, 2)])
    a = Seqgate(seqgate_bin, conf, tmp_path / "a")
    try:
        run_until_done(a, bootstrap, n, "at_least_once", 4)
    finally:
        a.cleanup()
    drop_changelog(bootstrap, changelog)
    # a copy of a-1 waits in the input: a store given up would apply it
    produce(bootstrap, n["in"], [event("a", 1)])

    # systemd's Restart=on-failure, eight times over: every start claims
    # the partition (two records) before its restore reads the changelog
    results = []
    for i in range(8):
        sg = Seqgate(seqgate_bin, conf, tmp_path / f"r{i}")
        try:
            rc = start_once(sg)
            results.append((rc, sg.events("exiting")[-1]
                            if sg.events("exiting") else None,
                            sg.events("restore_done")))
        finally:
            sg.cleanup()
    ran = [i for i, (rc, _, _) in enumerate(results) if rc is None]
    assert not ran, (f"starts {ran} of 8 restored the new changelog and ran "
                     f"(restore_done {results[ran[0]][2]})")
    assert [rc for rc, _, _ in results] == [2] * 8, results
    for _, line, _ in results:
        assert line["error"] == "SG_ERR_FOREIGN" and line.get("error_text"), \
            line
        assert f"{n['in']} [0]" in line["detail"], line
    assert outputs(bootstrap, n["out"], "at_least_once") == 4


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once"])
def test_changelog_recreated_while_running_refused(bootstrap, seqgate_bin,
                                                   tmp_path, guarantee):
    g = guarantee
    n, conf, changelog = setup(bootstrap, "clid-run", tmp_path, g)
    produce(bootstrap, n["in"], [event(f"agg-{a}", v) for a in range(6)
                                 for v in (1, 2, 3, 4)])
    a = Seqgate(seqgate_bin, conf, tmp_path / "a")
    try:
        a.start()
        wait_until(lambda: outputs(bootstrap, n["out"], g) >= 24, 60,
                   "the output", on_timeout=lambda: "\n" + a.log_tail())
        # the changelog lost and created again behind seqgate's back (an
        # operator "resetting" it); the next batches write into the new one
        drop_changelog(bootstrap, changelog)
        create_topics(bootstrap, {changelog: 1},
                      config={"cleanup.policy": "compact"})
        produce(bootstrap, n["in"], [event(f"agg-{a}", 5) for a in range(6)])
        # exactly_once commits them into the new log; at_least_once finds
        # its records not where its previous one ended and restores
        wait_until(lambda: not a.running()
                   or outputs(bootstrap, n["out"], g) >= 30, 60,
                   "the output after the new changelog, or a stop",
                   on_timeout=lambda: "\n" + a.log_tail())
        rc = a.stop() if a.running() else a.wait_exit(5)
        if rc == 0:  # it ran on: the next start must refuse
            rc = start_once(a)
            assert rc is not None, (
                "restored from the new changelog and ran: "
                f"{a.events('restore_done')}")
        assert rc == 2, a.log_tail()
        line = refusal(a)
        assert ("changelog id" in line["detail"]
                or "ahead of its changelog" in line["detail"]), line
        assert changelog in line["detail"], line
    finally:
        a.cleanup()


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once"])
def test_another_writers_changelog_refused(bootstrap, seqgate_bin, tmp_path,
                                           guarantee):
    n, conf, changelog = setup(bootstrap, "clid-other", tmp_path, guarantee)
    produce(bootstrap, n["in"], [event("a", v) for v in (1, 2, 3)])
    a = Seqgate(seqgate_bin, conf, tmp_path / "a")
    try:
        run_until_done(a, bootstrap, n, guarantee, 3)
    finally:
        a.cleanup()
    drop_changelog(bootstrap, changelog)

    # another instance, with an empty data_dir, takes the partition: it
    # creates the changelog again and writes well past A's checkpoint
    conf_b = dict(conf, data_dir=str(tmp_path / "data-b"), instance_id="clid-2")
    produce(bootstrap, n["in"], [event(f"b-{k}", v) for k in range(10)
                                 for v in (1, 2, 3)])
    b = Seqgate(seqgate_bin, conf_b, tmp_path / "b")
    try:
        run_until_done(b, bootstrap, n, guarantee, 33)
    finally:
        b.cleanup()

    rc = start_once(a)
    try:
        assert rc is not None, (
            "A restored B's changelog from its own checkpoint and ran: "
            f"{a.events('restore_done')}")
        assert rc == 2, a.log_tail()
        line = refusal(a)
        assert "changelog id" in line["detail"], line
        assert f"{n['in']} [0]" in line["detail"], line
    finally:
        a.cleanup()
    assert len(id_records(bootstrap, changelog)) == 1, "B's id, and only it"


def strip_changelog_ids(data_dir: Path, topic: str) -> int:
    """Cuts the changelog id field off every partition meta value of the
    store in `data_dir` (lmdb-utils' mdb_dump / mdb_load): the meta a store
    written before the field existed has. Returns how many were cut."""
    dump = subprocess.run(["mdb_dump", "-s", "meta", str(data_dir)],
                          check=True, capture_output=True, text=True).stdout
    lines = dump.splitlines()
    body = lines.index("HEADER=END") + 1
    end = lines.index("DATA=END")
    with_id = (META_VLEN + 1 + len(topic) + ID_FIELD_LEN) * 2
    cut = 0
    for i in range(body + 1, end, 2):  # key line, value line
        v = lines[i].strip()
        if len(v) == with_id:
            lines[i] = " " + v[:-ID_FIELD_LEN * 2]
            cut += 1
    subprocess.run(["mdb_load", "-s", "meta", "-f", "/dev/stdin",
                    str(data_dir)], input="\n".join(lines) + "\n", text=True,
                   check=True, capture_output=True)
    return cut


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once"])
def test_store_from_before_the_id_is_accepted(bootstrap, seqgate_bin,
                                              tmp_path, guarantee):
    n, conf, changelog = setup(bootstrap, "clid-upg", tmp_path, guarantee)
    produce(bootstrap, n["in"], [event("a", v) for v in (1, 2)])
    a = Seqgate(seqgate_bin, conf, tmp_path / "a")
    try:
        run_until_done(a, bootstrap, n, guarantee, 2)
        first = id_records(bootstrap, changelog)
        assert len(first) == 1, first
        assert strip_changelog_ids(tmp_path / "data", n["in"]) == 1

        # the upgrade: the store has no id, its delta restore finds none
        # (the changelog's one lies before the checkpoint): accepted, and a
        # new id record written and recorded
        produce(bootstrap, n["in"], [event("a", 3), event("a", 1)])
        run_until_done(a, bootstrap, n, guarantee, 3)
        assert a.events("restore_done"), a.log_tail()
        written = a.events("changelog_id_written")
        assert len(written) == 1, a.log_tail()
        ids = id_records(bootstrap, changelog)
        assert len(ids) == 2 and ids[1][0] == written[0]["offset"], \
            (ids, written)

        # from now on it is checked: a start verifies it, writes none
        a.start()
        assert a.stop() == 0, a.log_tail()
        assert not a.events("changelog_id_written"), a.log_tail()
        assert id_records(bootstrap, changelog) == ids
    finally:
        a.cleanup()
    # a-1 came twice: applied once
    assert outputs(bootstrap, n["out"], guarantee) == 3


def test_id_survives_compaction(bootstrap, seqgate_bin, tmp_path):
    g = "at_least_once"
    n = names("clid-cmp")
    create_topics(bootstrap, {n["in"]: 1, n["out"]: 1, n["dlq"]: 1})
    changelog = f"{n['group']}-{n['in']}-changelog"
    # a changelog the cleaner compacts at once: small segments, any dirt
    create_topics(bootstrap, {changelog: 1}, config={
        "cleanup.policy": "compact", "segment.ms": "200",
        "min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "0",
        "delete.retention.ms": "0"})
    conf = make_config(bootstrap=bootstrap, group=n["group"], instance="cmp-1",
                       data_dir=str(tmp_path / "data"), input_topic=n["in"],
                       output_topic=n["out"], dlq_topic=n["dlq"], guarantee=g)
    a = Seqgate(seqgate_bin, conf, tmp_path / "a")
    try:
        a.start()
        # one aggregate rewritten batch after batch, in many segments
        total = 0
        for rnd in range(12):
            produce(bootstrap, n["in"],
                    [event("a", total + k + 1) for k in range(5)])
            total += 5
            wait_until(lambda: outputs(bootstrap, n["out"], g) >= total, 60,
                       "the output", on_timeout=lambda: "\n" + a.log_tail())
            time.sleep(0.3)
        assert a.stop() == 0, a.log_tail()
        ids = id_records(bootstrap, changelog)
        assert len(ids) == 1, ids

        # the cleaner ran: the agg and meta records rewritten batch after
        # batch, and the tombstoned markers, are gone from the log (a probe
        # record of a kind restore skips rolls the active segment)
        def compacted() -> bool:
            produce(bootstrap, changelog, [{"key": b"\xffPprobe",
                                            "value": b"x", "partition": 0}])
            recs = consume_all(bootstrap, changelog, timeout_s=10)
            return recs[-1]["offset"] + 1 - len(recs) >= 15
        wait_until(compacted, 120, "the changelog's compaction", interval_s=3)
        assert id_records(bootstrap, changelog) == ids, "the id was compacted"
    finally:
        a.cleanup()

    # a delta restore (a restart) finds the id; a restore from the start
    # (an empty data_dir) finds it too and records it
    for conf_x, d in ((conf, "a2"),
                      (dict(conf, data_dir=str(tmp_path / "data-b"),
                            instance_id="cmp-2"), "b")):
        sg = Seqgate(seqgate_bin, conf_x, tmp_path / d)
        try:
            sg.start()
            produce(bootstrap, n["in"], [event("a", 1)])  # a duplicate
            time.sleep(2)
            assert sg.stop() == 0, sg.log_tail()
            assert not sg.events("changelog_id_written"), sg.log_tail()
            assert not sg.events("exiting"), sg.log_tail()
            done = sg.events("restore_done")
            assert done and done[-1].get("changelog_id"), sg.log_tail()
        finally:
            sg.cleanup()
    assert id_records(bootstrap, changelog) == ids
    assert outputs(bootstrap, n["out"], g) == total


def test_id_removed_by_retention_recorded_anew(bootstrap, seqgate_bin,
                                               tmp_path):
    from confluent_kafka import TopicPartition
    g = "exactly_once"
    n = names("clid-ret")
    create_topics(bootstrap, {n["in"]: 1, n["out"]: 1, n["dlq"]: 1})
    changelog = f"{n['group']}-{n['in']}-changelog"
    create_topics(bootstrap, {changelog: 1},
                  config={"cleanup.policy": "compact,delete"})
    conf = make_config(bootstrap=bootstrap, group=n["group"], instance="ret-1",
                       data_dir=str(tmp_path / "data"), input_topic=n["in"],
                       output_topic=n["out"], dlq_topic=n["dlq"], guarantee=g)
    produce(bootstrap, n["in"], [event("a", v) for v in (1, 2)])
    a = Seqgate(seqgate_bin, conf, tmp_path / "a")
    try:
        run_until_done(a, bootstrap, n, g, 2)
        [(at, _)] = id_records(bootstrap, changelog)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        fut = admin.delete_records([TopicPartition(changelog, 0, at + 1)])
        for f in fut.values():
            f.result(timeout=30)

        produce(bootstrap, n["in"], [event("a", 3), event("a", 1)])
        run_until_done(a, bootstrap, n, g, 3)
        assert not a.events("exiting"), a.log_tail()
        unv = a.events("changelog_id_unverifiable")
        assert unv and unv[0]["offset"] == at and \
            unv[0]["log_start"] == at + 1, a.log_tail()
        written = a.events("changelog_id_written")
        assert len(written) == 1 and written[0]["offset"] > at, a.log_tail()
        # checked from the next start on
        a.start()
        assert a.stop() == 0, a.log_tail()
        assert not a.events("changelog_id_unverifiable"), a.log_tail()
        assert not a.events("changelog_id_written"), a.log_tail()
    finally:
        a.cleanup()
    assert outputs(bootstrap, n["out"], g) == 3
