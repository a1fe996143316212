"""A record the output topic cannot take (semantics §3, DLQ output_rejected).

One valid record must never stop its partition. Two ways Kafka refuses a
record seqgate writes:

test_oversized_record_goes_to_dlq: a 999,861-byte value with CloudEvents
  headers, between two small records of the same aggregate on one
  partition. The broker and a default producer accept it as input, but
  seqgate's provenance header pushes the output record past the producer's
  message.max.bytes. Before: the batch was aborted and re-read every ~0.4 s
  forever, the small records never came out, no DLQ record. Now: both small
  records come out (the aggregate moves on), the big one is in the DLQ as
  output_rejected WITHOUT its value (the value is what made it too large;
  header __seqgate.errors.value_dropped says how long it was) and with its
  source topic/partition/offset, counted in dlq_by_reason.output_rejected.
  Both guarantees.
test_refused_record_rerouted: the broker refuses an output record at
  delivery for what it is (a record without a key on a compacted output
  topic: INVALID_RECORD), which no size check can foresee. The loop tells
  the engine which input record's output was refused (producing one record
  at a time to find it, since the broker refuses the whole record batch),
  the batch runs again and that record goes to the DLQ as output_rejected,
  WITH its value; the others come out.
"""

from __future__ import annotations

import json
import subprocess

import pytest
from kafkautil import (committed_offsets, consume_all, create_topics,
                       end_offsets, produce, unique_name)
from seqgate_proc import Seqgate, make_config, wait_until

BIG = 999_861


def _committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    return committed_offsets(bootstrap, group, topic, 1)


def _wire_size(key: bytes, value: bytes, headers: list) -> int:
    """librdkafka's size of a record against message.max.bytes
    (rd_kafka_msg_max_wire_size: 36 bytes of framing, key, value, and per
    header its name, value and their zigzag varint lengths)."""
    def varint(n):
        v, b = n << 1, 1
        while v >= 0x80:
            v >>= 7
            b += 1
        return b
    hs = sum(len(n) + len(v) + varint(len(n)) + varint(len(v))
             for n, v in headers)
    return 36 + len(key) + len(value) + hs


def _ce(v: int, value: bytes) -> dict:
    return {"key": b"a", "value": value, "partition": 0,
            "headers": [("ce_specversion", b"1.0"), ("ce_id", f"e{v}".encode()),
                        ("ce_source", b"urn:s"), ("ce_type", b"t"),
                        ("ce_sequence", str(v).encode())]}


def _run_until_committed(sg: Seqgate, bootstrap: str, group: str,
                         t_in: str) -> None:
    end = end_offsets(bootstrap, t_in)
    try:
        sg.start()
        wait_until(lambda: _committed(bootstrap, group, t_in) == end, 60,
                   f"committed offsets {end} (the partition moves on)",
                   on_timeout=lambda: "\n" + sg.log_tail())
        sg.wait_for_event("stats", 10)
        import time
        time.sleep(1.5)  # a stats line after the last batch
        assert sg.stop() == 0, sg.log_tail()
    finally:
        sg.cleanup()


@pytest.mark.parametrize("guarantee", ["exactly_once", "at_least_once"])
def test_oversized_record_goes_to_dlq(bootstrap, seqgate_bin, seqgatectl_bin,
                                      tmp_path,
                                      guarantee):
    t_in, t_out, t_dlq = (unique_name("big-in"), unique_name("big-out"),
                          unique_name("big-dlq"))
    group = unique_name("sg-big")
    create_topics(bootstrap, {t_in: 1, t_out: 1, t_dlq: 1})
    big = _ce(2, b"x" * BIG)
    # the input fits a default producer (message.max.bytes 1000000) ...
    in_size = _wire_size(big["key"], big["value"], big["headers"])
    assert in_size <= 1_000_000, in_size
    # ... the output, with __seqgate.source "<topic>/0/1", does not
    src = f"{t_in}/0/1".encode()
    out_size = _wire_size(big["key"], big["value"],
                          big["headers"] + [("__seqgate.source", src)])
    assert out_size > 1_000_000, out_size
    produce(bootstrap, t_in, [_ce(1, b"small-1"), big, _ce(3, b"small-3")])

    conf = make_config(bootstrap=bootstrap, group=group, instance="big",
                       data_dir=str(tmp_path / "data"), input_topic=t_in,
                       output_topic=t_out, dlq_topic=t_dlq,
                       guarantee=guarantee)
    sg = Seqgate(seqgate_bin, conf, tmp_path / "run")
    _run_until_committed(sg, bootstrap, group, t_in)

    out = consume_all(bootstrap, t_out, timeout_s=30, expect_count=2)
    assert [r["value"] for r in out] == [b"small-1", b"small-3"], \
        [(r["offset"], (r["value"] or b"")[:20]) for r in out]
    dlq = consume_all(bootstrap, t_dlq, timeout_s=30, expect_count=1)
    assert len(dlq) == 1, dlq
    d, h = dlq[0], dlq[0]["headers_dict"]
    assert h["__seqgate.errors.reason"] == b"output_rejected", h
    assert d["value"] is None, "the value is what made it too large"
    assert h["__seqgate.errors.value_dropped"] == str(BIG).encode()
    assert (h["__seqgate.errors.topic"], h["__seqgate.errors.partition"],
            h["__seqgate.errors.offset"]) == (t_in.encode(), b"0", b"1")
    assert h["ce_id"] == b"e2" and d["key"] == b"a", "the rest is kept"
    assert h["__seqgate.errors.aggregate"] == b"a"
    assert h["__seqgate.errors.actual_version"] == b"2"
    assert b"message.max.bytes" in h["__seqgate.errors.detail"]

    st = sg.last_stats()
    assert st["dlq_by_reason"]["output_rejected"] == 1, st
    assert st["applied_total"] == 2, st
    assert st["consumer_lag"] == 0, st
    assert st["batches_aborted_total"] == 0, st
    limits = sg.events("size_limits")
    assert limits and limits[0]["message.max.bytes"] == 1000000, limits
    assert limits[0]["max.message.bytes"][t_out] > 0, limits
    rejected = sg.events("output_rejected")
    assert rejected and rejected[0]["offset"] == 1, rejected

    # A DLQ record without its value cannot be replayed: seqgatectl says so
    # and produces nothing (before, it put a null-value record back on the
    # input topic, which came back as a new "malformed" DLQ record).
    in_end = end_offsets(bootstrap, t_in)
    r = subprocess.run([seqgatectl_bin, "replay", "--config",
                        str(sg.config_path), "--dlq", t_dlq, "--reason",
                        "output_rejected", "--json"],
                       text=True, capture_output=True, timeout=90)
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    summary = lines[-1]
    assert (summary["selected"], summary["replayed"], summary["failed"]) == \
        (1, 0, 1), (summary, r.stderr)
    assert r.returncode != 0, "a record not replayed is a failure"
    failed = [x for x in lines if x.get("action") == "failed"]
    assert failed and "value_dropped" in failed[0]["error"], lines
    assert end_offsets(bootstrap, t_in) == in_end, "nothing produced"


@pytest.mark.parametrize("guarantee", ["exactly_once", "at_least_once"])
def test_refused_record_rerouted(bootstrap, seqgate_bin, tmp_path, guarantee):
    t_in, t_out, t_dlq = (unique_name("inv-in"), unique_name("inv-out"),
                          unique_name("inv-dlq"))
    group = unique_name("sg-inv")
    create_topics(bootstrap, {t_in: 1, t_dlq: 1})
    # a compacted topic refuses a record without a key (INVALID_RECORD)
    create_topics(bootstrap, {t_out: 1}, config={"cleanup.policy": "compact"})

    def rec(i, key):
        return {"key": key, "value": f"v{i}".encode(), "partition": 0,
                "headers": [("ce_specversion", b"1.0"),
                            ("ce_id", f"e{i}".encode()),
                            ("ce_source", b"urn:s"), ("ce_type", b"t")]}

    produce(bootstrap, t_in, [rec(1, b"k1"), rec(2, None), rec(3, b"k3")])
    conf = make_config(bootstrap=bootstrap, group=group, instance="inv",
                       data_dir=str(tmp_path / "data"), input_topic=t_in,
                       output_topic=t_out, dlq_topic=t_dlq,
                       guarantee=guarantee)
    # dedup only: a record without a key (no aggregate) is valid
    topic = conf["topics"][t_in]
    topic["envelope"].update({"aggregate": None, "version": None})
    topic["ordering"] = {"mode": "none"}
    sg = Seqgate(seqgate_bin, conf, tmp_path / "run")
    _run_until_committed(sg, bootstrap, group, t_in)

    out = consume_all(bootstrap, t_out, timeout_s=30, expect_count=2)
    values = [r["value"] for r in out]
    if guarantee == "exactly_once":
        assert values == [b"v1", b"v3"], values
    else:  # the re-run may write what was delivered before the refusal again
        assert set(values) == {b"v1", b"v3"}, values
    dlq = consume_all(bootstrap, t_dlq, timeout_s=30, expect_count=1)
    assert len(dlq) == 1, dlq
    h = dlq[0]["headers_dict"]
    assert h["__seqgate.errors.reason"] == b"output_rejected", h
    assert dlq[0]["value"] == b"v2", "refused as invalid: the value is kept"
    assert "__seqgate.errors.value_dropped" not in h
    assert h["__seqgate.errors.offset"] == b"1"
    assert b"refused" in h["__seqgate.errors.detail"], h
    refused = sg.events("output_refused")
    assert refused and refused[0]["error"] == "INVALID_RECORD", refused
    assert refused[0]["rerouted"] is True
    st = sg.last_stats()
    assert st["dlq_by_reason"]["output_rejected"] == 1, st
    assert st["consumer_lag"] == 0, st
