"""examples/orders.json's envelope (digest "/data") against a real broker.

The example a user copies digests the event's data (semantics §2): in
binary mode the record value *is* the data, in structured mode it is the
event's "data" member, and the canonical form keeps every number exactly.
One aggregate, one partition; every input record carries its verdict:

  e1 v1  binary, data {"amount": 9007199254740993, ...}            applied
  e1     the same data re-serialised (member order, spaces)         duplicate
  e1     data with amount 9007199254740992 (beyond 2^53 only)       DLQ idempotency_conflict
  e2 v2  binary, data {"amount": 1.0}                               applied
  e2     data {"amount": 1.00}: another number text                 DLQ idempotency_conflict
  e3 v3  structured (application/cloudevents+json), data {...}      applied
  e3     structured again, other "time", same data                  duplicate
  e4 v4  binary, data that is not JSON (bytes)                      applied
  e4     the same bytes                                             duplicate

Before, every binary-mode event was DLQ `malformed` ("/data" was looked up
inside the value), and e1's different amount was dropped as a duplicate.
"""

from __future__ import annotations

import json
from collections import Counter

from kafkautil import consume_all, create_topics, end_offsets, produce, unique_name
from seqgate_proc import Seqgate, make_config, wait_until

SOURCE = "/shop/eu"


def binary(ce_id: str, seq: int, data: bytes, expect: str) -> dict:
    return {"key": b"order-1", "value": data, "partition": 0,
            "headers": [("ce_specversion", b"1.0"), ("ce_id", ce_id.encode()),
                        ("ce_source", SOURCE.encode()),
                        ("ce_type", b"order.updated"),
                        ("ce_sequence", str(seq).encode()),
                        ("content-type", b"application/json")],
            "_expect": expect}


def structured(ce_id: str, seq: int, time: str, data: str, expect: str) -> dict:
    event = ('{"specversion":"1.0","id":"%s","source":"%s","type":'
             '"order.updated","sequence":"%d","time":"%s","data":%s}'
             % (ce_id, SOURCE, seq, time, data))
    return {"key": b"order-1", "value": event.encode(), "partition": 0,
            "headers": [("content-type", b"application/cloudevents+json")],
            "_expect": expect}


def records() -> list[dict]:
    return [
        binary("e1", 1, b'{"amount": 9007199254740993, "currency": "EUR"}', "out"),
        binary("e1", 1, b'{"currency":"EUR","amount":9007199254740993}', "dup"),
        binary("e1", 1, b'{"amount": 9007199254740992, "currency": "EUR"}',
               "idempotency_conflict"),
        binary("e2", 2, b'{"amount": 1.0}', "out"),
        binary("e2", 2, b'{"amount": 1.00}', "idempotency_conflict"),
        structured("e3", 3, "2024-01-01T00:00:00Z",
                   '{"amount": 7, "note": "\\u0041"}', "out"),
        structured("e3", 3, "2024-01-01T00:00:09Z",
                   '{"note": "A", "amount": 7}', "dup"),
        binary("e4", 4, b"\x00\x01avro-ish bytes", "out"),
        binary("e4", 4, b"\x00\x01avro-ish bytes", "dup"),
    ]


def test_orders_example_digest(bootstrap, seqgate_bin, repo_root, tmp_path):
    t_in, t_out, t_dlq = (unique_name("orders"), unique_name("orders-clean"),
                          unique_name("orders-dlq"))
    create_topics(bootstrap, {t_in: 1, t_out: 1, t_dlq: 1})
    conf = make_config(bootstrap=bootstrap, group=unique_name("sg-digest"),
                       instance="seqgate-digest-1",
                       data_dir=str(tmp_path / "data"), input_topic=t_in,
                       output_topic=t_out, dlq_topic=t_dlq,
                       stats_interval_ms=500)
    with open(repo_root / "examples" / "orders.json", encoding="utf-8") as f:
        example = json.load(f)
    envelope = example["topics"]["orders"]["envelope"]
    assert envelope["digest"] == "/data"
    conf["topics"][t_in]["envelope"] = envelope

    recs = records()
    want = Counter(r["_expect"] for r in recs)
    sg = Seqgate(seqgate_bin, conf, tmp_path / "run")
    try:
        sg.start()
        produce(bootstrap, t_in, [{k: v for k, v in r.items() if k != "_expect"}
                                  for r in recs])
        wait_until(lambda: sum(end_offsets(bootstrap, t_out).values()) >= want["out"]
                   and sum(end_offsets(bootstrap, t_dlq).values())
                   >= want["idempotency_conflict"],
                   30, "output and DLQ records",
                   on_timeout=lambda: "\n" + sg.log_tail())
        wait_until(lambda: (sg.last_stats() or {}).get("records_total") == len(recs),
                   30, "every record judged", on_timeout=lambda: "\n" + sg.log_tail())
        rc = sg.stop()
        assert rc == 0, f"SIGTERM exit status {rc}\n{sg.log_tail()}"
    finally:
        sg.cleanup()

    out = consume_all(bootstrap, t_out, timeout_s=30)
    dlq = consume_all(bootstrap, t_dlq, timeout_s=30)
    ids = [dict(o["headers"]).get("ce_id") for o in out]
    # structured events carry their id in the value, not in a header
    assert [o["value"] for o in out] == [r["value"] for r in recs
                                         if r["_expect"] == "out"], ids
    reasons = [dict(d["headers"])["__seqgate.errors.reason"].decode() for d in dlq]
    assert reasons == ["idempotency_conflict"] * want["idempotency_conflict"], reasons
    stats = sg.last_stats()
    got = {k: stats.get(k) for k in ("applied_total", "dedup_hits_total",
                                     "idempotency_parameter_conflicts_total",
                                     "malformed_total")}
    assert got == {"applied_total": want["out"], "dedup_hits_total": want["dup"],
                   "idempotency_parameter_conflicts_total":
                       want["idempotency_conflict"],
                   "malformed_total": 0}, stats
